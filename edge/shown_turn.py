"""A turn whose events are shown on the device's display as they are read."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from voxqueue.client.direct import Turn
from voxqueue.turns import StreamEntry


class ShownTurn(Turn):
    """A turn whose events are shown as they are read (also while its reply plays); it reads
    and cancels through the turn it wraps (Redis, or the gateway)."""

    def __init__(self, turn: Turn, show: Callable[[StreamEntry], None]) -> None:
        super().__init__(turn.client, turn.spec)
        self.inner = turn
        self._show = show
        self.seen: set[str] = set()
        """The event types read so far."""

    def _read(self, block_ms: int) -> list[StreamEntry]:
        self.inner._last_id = self._last_id
        return self.inner._read(block_ms)

    def _give_up(self) -> bool:
        return self.inner._give_up()

    def cancel(self, reason: str = "cancelled by the caller") -> bool:
        return self.inner.cancel(reason)

    def events(self, timeout: float | None = None) -> Iterator[StreamEntry]:
        shown = len(self._entries)
        for n, entry in enumerate(super().events(timeout=timeout)):
            if n >= shown:
                self.seen.add(entry.event.type)
                self._show(entry)
            yield entry
