"""Serving the gateway: uvicorn with the limits a server facing the network needs. A request
head must arrive within ``VOXQUEUE_GATEWAY_HEADER_TIMEOUT_S`` (uvicorn has no such timeout: a
slowloris client could hold a connection for ever), an idle connection is closed, connections
are capped, and a WebSocket message is at most ``VOXQUEUE_GATEWAY_WS_MAX_FRAME_BYTES``."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

from voxqueue.gateway.app import create_app
from voxqueue.settings import ClientSettings

log = logging.getLogger("voxqueue.gateway")


class HeadTimeoutH11(H11Protocol):
    """uvicorn's h11 protocol, closing a connection whose request head is late: from the
    connection, or from the first byte of a request on a kept-alive one."""

    head_timeout_s = 10.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None
        self._upgraded = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._in_request() or self._upgraded:
            self._disarm()
        elif self._head_timer is None:
            self._arm()

    def handle_websocket_upgrade(self, event: Any) -> None:
        self._disarm()  # the socket is the WebSocket protocol's now, with its own limits
        self._upgraded = True
        super().handle_websocket_upgrade(event)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _in_request(self) -> bool:
        return self.cycle is not None and not self.cycle.response_complete

    def _arm(self) -> None:
        self._head_timer = self.loop.call_later(self.head_timeout_s, self._late)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _late(self) -> None:
        self._head_timer = None
        if not (self._in_request() or self._upgraded or self.transport.is_closing()):
            self.transport.close()


def serve(settings: ClientSettings, *, certfile: str | None = None,
          keyfile: str | None = None) -> None:
    """Run the gateway (uvicorn), with TLS when a certificate is given."""
    import uvicorn

    if certfile is None and settings.gateway.host not in ("127.0.0.1", "::1", "localhost"):
        log.warning("the gateway serves plain HTTP on %s: device tokens cross the network in "
                    "clear unless a TLS proxy is in front (--certfile/--keyfile)",
                    settings.gateway.host)
    protocol = type("GatewayH11", (HeadTimeoutH11,),
                    {"head_timeout_s": settings.gateway.header_timeout_s})
    uvicorn.run(create_app(settings), host=settings.gateway.host, port=settings.gateway.port,
                ssl_certfile=certfile, ssl_keyfile=keyfile, log_level="info",
                proxy_headers=True, server_header=False, http=protocol,
                timeout_keep_alive=settings.gateway.idle_timeout_s,
                limit_concurrency=settings.gateway.max_connections,
                ws_max_size=settings.gateway.ws_max_frame_bytes)
