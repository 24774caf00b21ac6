"""A handle on one turn: its events as they arrive, its result, its audio, its cancellation."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import redis

from voxqueue.audio import to_wav
from voxqueue.contracts import ErrorCode, TurnEvent, TurnResult, TurnSpec
from voxqueue.errors import Unavailable
from voxqueue.playback import in_speaking_order
from voxqueue.result import assemble
from voxqueue.turns import StreamEntry

if TYPE_CHECKING:
    from voxqueue.client import Client

#: Seconds a waiting client gives the workers past the deadline before ending the turn itself.
DEADLINE_GRACE_S = 5.0


class Turn:
    """A running or finished turn: its events, its result, its audio."""

    def __init__(self, client: Client, spec: TurnSpec) -> None:
        self.client = client
        self.spec = spec
        self._entries: list[StreamEntry] = []
        self._last_id = "0"
        self._done = False

    @property
    def turn_id(self) -> str:
        return self.spec.turn_id

    @property
    def session_id(self) -> str:
        return self.spec.session_id

    @property
    def done(self) -> bool:
        """Whether this handle has read the turn's end."""
        return self._done

    def events(self, timeout: float | None = None) -> Iterator[StreamEntry]:
        """Yield entries as they arrive, until ``run-end``.

        Past the deadline (plus a grace period) with no ``run-end``, the client ends the turn
        itself with a timeout error, so a caller never waits forever; while the server is
        unreachable it keeps trying until then, and ends the turn locally if it must.
        """
        yield from self._entries
        give_up = min(self.spec.deadline + DEADLINE_GRACE_S,
                      time.time() + timeout if timeout is not None else float("inf"))
        unreachable: str | None = None
        ended_by_us = False
        while not self._done:
            wait_ms = int(max(0.05, min(1.0, give_up - time.time())) * 1000)
            try:
                entries = self._read(wait_ms)
                unreachable = None
            except (redis.RedisError, Unavailable) as exc:
                unreachable = f"{exc.__class__.__name__}: {exc}"
                entries = []
                time.sleep(min(0.5, max(0.0, give_up - time.time())))
            for entry in entries:
                self._last_id = entry.id
                self._entries.append(entry)
                if entry.event.type == "run-end":
                    self._done = True
                yield entry
            if not self._done and time.time() >= give_up:
                if timeout is not None and give_up < self.spec.deadline + DEADLINE_GRACE_S:
                    raise TimeoutError(f"turn {self.turn_id} still running after {timeout} s")
                if unreachable is None and not ended_by_us:
                    ended_by_us = True
                    if self._give_up():  # its run-end is on the stream now: read it
                        continue
                    yield from self._end_locally(ErrorCode.TIMEOUT,
                                                 "no reply before the turn's deadline")
                    continue
                if unreachable is None:  # ended, yet no run-end to read (the stream expired)
                    yield from self._end_locally(ErrorCode.TIMEOUT,
                                                 "the turn ended but its events are gone")
                    continue
                yield from self._end_locally(ErrorCode.REDIS_UNAVAILABLE,
                                             f"the server is unreachable ({unreachable})")

    def _read(self, block_ms: int) -> list[StreamEntry]:
        """The entries after the last one read, waiting up to ``block_ms`` for the first."""
        return self.client.store.read(self.turn_id, self._last_id, block_ms=block_ms)

    def _give_up(self) -> bool:
        """End the overdue turn at the server (or find it ended); False when it cannot."""
        self.client.store.finish(self.spec, "timeout", (
            ErrorCode.TIMEOUT, "no reply before the turn's deadline"))
        return True

    def _end_locally(self, code: ErrorCode, message: str) -> Iterator[StreamEntry]:
        """End the turn in this process when Redis cannot be reached to record the end."""
        now = time.time()
        for event in (TurnEvent(type="error", turn_id=self.turn_id, ts=now,
                                data={"code": str(code), "message": message}),
                      TurnEvent(type="run-end", turn_id=self.turn_id, ts=now,
                                data={"status": "timeout", "local": True})):
            entry = StreamEntry(id=self._last_id, event=event)
            self._entries.append(entry)
            yield entry
        self._done = True

    def playback(self, timeout: float | None = None) -> Iterator[bytes]:
        """The reply's PCM in speaking order, each chunk as soon as it can be played (see
        :func:`voxqueue.playback.in_speaking_order`: nothing skipped; a sentence whose audio
        was interrupted is heard again from its start, never spliced)."""
        yield from in_speaking_order(self.events(timeout=timeout))

    def wait(self, timeout: float | None = None) -> TurnResult:
        """Block until the turn ends; return its result."""
        for _ in self.events(timeout=timeout):
            pass
        return self.result()

    def result(self) -> TurnResult:
        return assemble(self.spec, self._entries)[0]

    def audio(self) -> bytes:
        """The reply as 16 kHz mono 16-bit PCM (what has arrived so far)."""
        return assemble(self.spec, self._entries)[1]

    def save_audio(self, path: str | Path) -> Path:
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(to_wav(self.audio()))
        return out

    def cancel(self, reason: str = "cancelled by the caller") -> bool:
        """Stop the turn in every stage: stages check the flag and stop; the turn ends now.
        False when it had already ended (nothing is written then)."""
        store = self.client.store
        if store.ended(self.turn_id):
            return False
        # The event first: a stage that sees the flag ends the turn at once, and nothing is
        # written after the end.
        store.emit(self.turn_id, "cancelled", {"reason": reason})
        store.cancel(self.turn_id, reason)
        store.finish(self.spec, "cancelled")
        return True
