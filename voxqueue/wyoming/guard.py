"""What a client may do: connect from which networks, send how large an event, start how many
turns a minute, and run which tools (its turns run as one named device, with no side effects
unless the operator allows them). Wyoming has no authentication: these are the whole guard."""

from __future__ import annotations

import asyncio
import ipaddress
import math
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class WyomingPolicy(BaseSettings):
    """What the turns of Wyoming clients may do (``VOXQUEUE_WYOMING_*``); where the server
    listens and who may connect are voxqueue's settings (``settings.wyoming.uri``, ``.allow``)."""

    model_config = SettingsConfigDict(env_prefix="VOXQUEUE_WYOMING_", env_file=".env",
                                      extra="ignore")

    device: str = Field(default="wyoming", pattern=r"^[A-Za-z0-9_-]{1,64}$")
    """The device every Wyoming turn runs as: its monitors, timers, memory and per-owner limits
    are this device's, whatever conversation id a client makes up."""
    tools: str = ""
    """The side-effecting tools Wyoming turns may run (comma-separated, ``*``: all); empty:
    none (Home Assistant services, timers, monitors, memory writes are refused)."""
    turns_per_minute: int = Field(default=60, ge=1)
    """Requests that start turns (speech to text, a conversation turn, a synthesis) one client
    address may make per minute; more get an ``error`` (``rate-limited``)."""

    @property
    def effects_allowed(self) -> tuple[str, ...] | None:
        """For the turn's spec: None when every tool is allowed (``*``)."""
        names = tuple(n.strip() for n in self.tools.split(",") if n.strip())
        return None if "*" in names else names


class RateLimited(Exception):
    """A client address over ``turns_per_minute``; ``retry_after_s``: when it may again."""

    code = "rate-limited"

    def __init__(self, retry_after_s: float, per_minute: int) -> None:
        super().__init__(f"over {per_minute} requests a minute from this address "
                         f"(VOXQUEUE_WYOMING_TURNS_PER_MINUTE): try again in "
                         f"{math.ceil(retry_after_s)} s")
        self.retry_after_s = retry_after_s


class PeerRate:
    """Requests per client address in the last minute, in this process (the server's clients
    are its connections; HA opens one per request). A refused request is not counted."""

    WINDOW_S = 60.0
    MAX_PEERS = 4096  # the least recently seen are forgotten past this

    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_minute = per_minute
        self.clock = clock
        self.seen: OrderedDict[str, deque[float]] = OrderedDict()

    def hit(self, peer: object) -> None:
        """Count one request from ``peer``; raises :class:`RateLimited` when over the limit."""
        key = peer_address(peer)
        now = self.clock()
        times = self.seen.pop(key, None) or deque()
        while times and times[0] <= now - self.WINDOW_S:
            times.popleft()
        self.seen[key] = times
        while len(self.seen) > self.MAX_PEERS:
            self.seen.popitem(last=False)
        if len(times) >= self.per_minute:
            raise RateLimited(times[0] + self.WINDOW_S - now, self.per_minute)
        times.append(now)


def peer_address(peer: object) -> str:
    """The address part of ``peername`` (a Unix socket's peer: ``local``)."""
    return str(peer[0]) if isinstance(peer, tuple) and peer else "local"


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
