"""What a client may send: from which networks, and how large an event may be."""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import Sequence

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class EventTooLarge(Exception):
    """A client announced an event part larger than the server takes."""


def networks(spec: str) -> list[Network]:
    """``"10.0.0.0/8,::1/128"`` as networks; a clear error for a wrong one."""
    found: list[Network] = []
    for part in (p.strip() for p in spec.split(",")):
        if part:
            try:
                found.append(ipaddress.ip_network(part, strict=False))
            except ValueError as exc:
                raise ValueError(f"VOXQUEUE_WYOMING_ALLOW: {part!r} is not a network") from exc
    return found


def allowed(peer: object, allow: Sequence[Network]) -> bool:
    """Whether the peer (``writer.get_extra_info("peername")``) is in an allowed network; a
    Unix socket's peer (no address) is local, so allowed."""
    if not isinstance(peer, tuple) or not peer:
        return True
    try:
        address = ipaddress.ip_address(str(peer[0]).split("%")[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return any(address in net for net in allow)


class CappedReader:
    """A stream reader for ``wyoming.event.async_read_event`` that refuses to read an event's
    data or payload longer than ``cap`` bytes (it would otherwise read whatever length the
    client's header claims)."""

    def __init__(self, reader: asyncio.StreamReader, cap: int) -> None:
        self.reader = reader
        self.cap = cap
        self.last_line = b""

    async def readline(self) -> bytes:
        """The next header line (kept in ``last_line``, so a line that is not an event can
        be told from the end of the stream)."""
        try:
            self.last_line = await self.reader.readline()
        except ValueError as exc:  # past the stream's line limit (64 KiB)
            raise EventTooLarge(f"an event header over the line limit: {exc}") from exc
        return self.last_line

    async def readexactly(self, n: int) -> bytes:
        if n > self.cap:
            raise EventTooLarge(f"an event part of {n} bytes, over the limit of {self.cap} "
                                "(VOXQUEUE_WYOMING_MAX_EVENT_BYTES)")
        return await self.reader.readexactly(n)
