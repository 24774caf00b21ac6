"""The listening server: many clients at once, each with its own handler, one client API."""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from urllib.parse import urlparse

import structlog
from wyoming.server import AsyncServer, AsyncTcpServer

from voxqueue.client.direct import Client
from voxqueue.settings import Settings
from voxqueue.wyoming.guard import PeerRate, WyomingPolicy, networks
from voxqueue.wyoming.handler import WyomingHandler

log = structlog.get_logger("voxqueue.wyoming")

#: Threads that wait on the queues for the clients (one per request in flight).
WAITING_THREADS = 256


async def start(settings: Settings, client: Client,
                policy: WyomingPolicy | None = None) -> AsyncServer:
    """Listen on ``settings.wyoming.uri`` (``tcp://`` or ``unix://``) without blocking."""
    allow = networks(settings.wyoming.allow)
    policy = policy or WyomingPolicy()
    rate = PeerRate(policy.turns_per_minute)
    loop = asyncio.get_running_loop()
    loop.set_default_executor(ThreadPoolExecutor(WAITING_THREADS, "wyoming-wait"))
    server = AsyncServer.from_uri(settings.wyoming.uri)
    await server.start(partial(WyomingHandler, client=client, settings=settings, allow=allow,
                               policy=policy, rate=rate))
    log.info("wyoming server listening", uri=settings.wyoming.uri, allow=settings.wyoming.allow,
             device=policy.device, side_effects=policy.tools or "none")
    return server


def bound_port(server: AsyncServer) -> int | None:
    """The TCP port the server listens on (the one chosen when the URI said port 0)."""
    inner = getattr(server, "_server", None)
    if isinstance(server, AsyncTcpServer) and inner is not None and inner.sockets:
        return int(inner.sockets[0].getsockname()[1])
    return None


async def serve(settings: Settings, *, zeroconf_name: str | None = None) -> None:
    """Serve until cancelled (SIGINT/SIGTERM); advertise ``_wyoming._tcp`` when asked."""
    client = Client(settings)
    server = await start(settings, client)
    if zeroconf_name is not None:
        await _advertise(settings, server, zeroconf_name)
    try:
        await asyncio.Event().wait()
    finally:
        await server.stop()
        client.close()


async def _advertise(settings: Settings, server: AsyncServer, name: str) -> None:
    from wyoming.zeroconf import HomeAssistantZeroconf

    uri = urlparse(settings.wyoming.uri)
    port = bound_port(server)
    if uri.scheme != "tcp" or port is None:
        raise ValueError("zeroconf needs a tcp:// URI")
    host = uri.hostname if uri.hostname not in (None, "0.0.0.0", "::") else None
    zc = HomeAssistantZeroconf(port=port, name=name or None, host=host)
    await zc.register_server()
    log.info("wyoming server advertised", service="_wyoming._tcp", name=zc.name, host=zc.host,
             port=port)


def quiet_library_logs() -> None:
    """The ``wyoming`` library logs every event at DEBUG; keep it at INFO."""
    logging.getLogger("wyoming").setLevel(logging.INFO)
