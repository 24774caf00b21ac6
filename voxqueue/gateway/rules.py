"""What the gateway refuses, and how it names a device's sessions."""

from __future__ import annotations

import math
import re

from voxqueue.contracts.gateway import SESSION_PATTERN

#: Sample rates a device may send raw PCM at.
MIN_RATE, MAX_RATE = 8000, 48000


class Refused(Exception):
    """A request the gateway answers with an error: status, code, message."""

    def __init__(self, status: int, code: str, message: str,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.headers = status, code, message, headers


def session_of(device: str, session: str | None) -> str:
    """A device's sessions live in its own namespace: no device can name another's. The
    separator, ``:``, is in neither a device's name nor a session's, so ``kitchen`` with
    session ``hall.x`` and ``kitchen.hall`` with session ``x`` are two sessions."""
    if session is not None and re.fullmatch(SESSION_PATTERN, session) is None:
        raise Refused(400, "invalid-input", "session: 1 to 64 of A-Z a-z 0-9 _ . -")
    return f"dev:{device}:{session or 'default'}"


def deadline_of(asked: float | str | None, ceiling: float) -> float | None:
    """A deadline a device asked for, in seconds: finite, above 0, at most the ceiling."""
    if asked is None:
        return None
    try:
        seconds = float(asked)
    except ValueError as exc:
        raise Refused(400, "invalid-input", f"deadline_s: seconds, got {str(asked)[:20]!r}") \
            from exc
    if not math.isfinite(seconds) or seconds <= 0:
        raise Refused(400, "invalid-input", f"deadline_s must be a number of seconds above 0, "
                      f"got {asked}")
    if seconds > ceiling:
        raise Refused(400, "invalid-input", f"deadline_s {asked} is over the server's ceiling "
                      f"of {ceiling} s")
    return seconds


def rate_of(asked: str | None, default: int | None) -> int | None:
    """A raw PCM sample rate a device asked for, within MIN_RATE..MAX_RATE."""
    if asked is None:
        return default
    if not asked.isdigit() or not MIN_RATE <= int(asked) <= MAX_RATE:
        raise Refused(400, "invalid-input", f"rate: a sample rate from {MIN_RATE} to "
                      f"{MAX_RATE} Hz, got {asked[:12]!r}")
    return int(asked)
