"""Connections in flight, counted by each gateway process: what one device may hold open at
once. (Its budgets per minute and per hour are :mod:`voxqueue.budgets`, shared with the
workers.)"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from voxqueue.gateway.rules import Refused


class InFlight:
    """Connections of one kind a device may hold at once, in this gateway process."""

    def __init__(self, kind: str, per_device: int) -> None:
        self.kind = kind
        self.per_device = per_device
        self.held: dict[str, int] = {}

    @contextlib.contextmanager
    def slot(self, device: str) -> Iterator[None]:
        """Hold one for the block; :class:`Refused` (429) when the device holds them all."""
        if self.held.get(device, 0) >= self.per_device:
            raise Refused(429, "too-many-connections", f"this device has {self.per_device} "
                          f"{self.kind} open already", {"Retry-After": "1"})
        self.held[device] = self.held.get(device, 0) + 1
        try:
            yield
        finally:
            self.held[device] -= 1
            if not self.held[device]:
                del self.held[device]
