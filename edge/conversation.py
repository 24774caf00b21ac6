"""Which conversation a device's next turn belongs to: a fixed session, or a new one after the
device has been idle for ``session_idle_s``."""

from __future__ import annotations

import secrets
import time

from edge.settings import EdgeSettings


class Conversation:
    """The session id of each turn a device starts."""

    def __init__(self, edge: EdgeSettings) -> None:
        self.edge = edge
        self._session: str | None = None
        self._last_turn = 0.0

    def session_id(self) -> str:
        """The session for a turn starting now (the idle clock restarts)."""
        if self.edge.session:
            return self.edge.session
        now = time.monotonic()
        if self._session is None or now - self._last_turn > self.edge.session_idle_s:
            # Random, not a clock: a session id another party could guess is one it could
            # name (directly on Redis, or on a gateway shared with a careless setting).
            self._session = f"{self.edge.device[:32]}.{secrets.token_hex(8)}"
        self._last_turn = now
        return self._session
