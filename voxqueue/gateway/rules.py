"""What the gateway refuses, and how it names a device's sessions."""

from __future__ import annotations

import re

from voxqueue.contracts.gateway import SESSION_PATTERN


class Refused(Exception):
    """A request the gateway answers with an error: status, code, message."""

    def __init__(self, status: int, code: str, message: str,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.headers = status, code, message, headers


def session_of(device: str, session: str | None) -> str:
    """A device's sessions live in its own namespace: no device can name another's."""
    if session is not None and re.fullmatch(SESSION_PATTERN, session) is None:
        raise Refused(400, "invalid-input", "session: 1 to 64 of A-Z a-z 0-9 _ . -")
    return f"dev.{device}.{session or 'default'}"
