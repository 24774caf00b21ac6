"""The browser device: the page the gateway serves at ``/`` (plain ES modules from
``voxqueue/gateway/page/``, no build step), a device like any other with its own token.

Only the page's own files are served, each with headers that keep the page to its gateway: a
Content-Security-Policy that allows scripts, styles, the audio worklet and connections
(HTTP and WebSocket) to this origin only, no framing, no referrer, no content sniffing, and the
microphone for this origin only.
"""

from __future__ import annotations

from importlib import resources

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

#: The page's files and their media types: nothing else under ``/page/`` is served.
FILES: dict[str, str] = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "gateway-api.js": "text/javascript; charset=utf-8",
    "capture.js": "text/javascript; charset=utf-8",
    "capture-worklet.js": "text/javascript; charset=utf-8",
    "endpointing.js": "text/javascript; charset=utf-8",
    "player.js": "text/javascript; charset=utf-8",
    "speaking-order.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
    "icon.svg": "image/svg+xml",
}

#: 'self' covers ws:// and wss:// to the same host and port (CSP Level 3).
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
       "connect-src 'self'; worker-src 'self'; manifest-src 'self'; form-action 'none'; "
       "frame-ancestors 'none'; base-uri 'none'")

HEADERS = {
    "Content-Security-Policy": CSP,
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "Permissions-Policy": "microphone=(self), camera=(), geolocation=()",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cache-Control": "no-cache",
}


def page_file(name: str) -> bytes:
    """One of the page's files, as shipped in the package."""
    return resources.files("voxqueue.gateway").joinpath("page", name).read_bytes()


async def _serve(request: Request) -> Response:
    name = request.path_params.get("name", "index.html")
    if name not in FILES:
        return PlainTextResponse("not found", status_code=404, headers=HEADERS)
    return Response(page_file(name), media_type=FILES[name], headers=HEADERS)


def page_routes() -> list[BaseRoute]:
    """``/`` (the page) and ``/page/{name}`` (its modules, styles and icon)."""
    return [Route("/", _serve), Route("/page/{name:str}", _serve)]
