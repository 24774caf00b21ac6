"""Local stand-ins for the HTTP services the tools talk to, on 127.0.0.1.

One aiohttp server in a background thread, with a path prefix per service:

- ``/geo/v1/search``      Open-Meteo geocoding (knows Paris, Springfield x2; anything else: none)
- ``/meteo/v1/forecast``  Open-Meteo forecast (current conditions and ``forecast_days`` days)
- ``/wiki/page/summary/{title}``  Wikipedia REST summaries (a standard page, a disambiguation)
- ``/feeds/{rss,atom,broken}.xml``  news feeds
- ``/ha/api/...``         Home Assistant (Bearer token ``ha-test-token``)
- ``/hook``, ``/ntfy/{topic}``  notification webhook and ntfy topic
- ``/web/...``            pages for fetch_url: html, text, json, binary, big, slow, redirects
- ``/web/p/{name}``       an HTML page a test writes (``pages[name]``), e.g. an injected one
- ``/web/collect``        where an injected page asks for data to be sent (answers "thanks")
- ``/moved/{port}/...``   any method: 307 to the same path on ``127.0.0.1:{port}``

Every request is recorded (``requests``); ``settings()`` gives the tool settings pointing here.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

from aiohttp import web

from testkit.fakes.threads import serve_in_thread
from voxqueue.settings_tools import ToolSettings

HA_TOKEN = "ha-test-token"

PLACES: dict[str, list[dict[str, Any]]] = {
    "paris": [
        {
            "name": "Paris",
            "latitude": 48.85341,
            "longitude": 2.3488,
            "country": "France",
            "country_code": "FR",
            "admin1": "Île-de-France",
            "timezone": "Europe/Paris",
        }
    ],
    "springfield": [
        {
            "name": "Springfield",
            "latitude": 39.80172,
            "longitude": -89.64371,
            "country": "United States",
            "country_code": "US",
            "admin1": "Illinois",
        },
        {
            "name": "Springfield",
            "latitude": 37.21533,
            "longitude": -93.29824,
            "country": "United States",
            "country_code": "US",
            "admin1": "Missouri",
        },
    ],
}

RSS = """<?xml version="1.0" encoding="UTF-8"?>
<rss version="2.0"><channel><title>Test News</title><link>http://example.invalid/</link>
<description>Fake</description>
<item><title>Markets rally &amp; bonds slip</title><link>http://example.invalid/1</link></item>
<item><title>Local team wins the cup</title><link>http://example.invalid/2</link></item>
<item><title>Rain expected all week</title><link>http://example.invalid/3</link></item>
</channel></rss>"""

ATOM = """<?xml version="1.0" encoding="utf-8"?>
<feed xmlns="http://www.w3.org/2005/Atom"><title>Atom Times</title>
<id>urn:uuid:feed</id><updated>2026-05-01T12:00:00Z</updated>
<entry><title>First atom story</title><id>urn:uuid:1</id>
<updated>2026-05-01T12:00:00Z</updated></entry>
<entry><title>Second atom story</title><id>urn:uuid:2</id>
<updated>2026-05-01T11:00:00Z</updated></entry>
</feed>"""

PAGE = """<!doctype html><html><head><title>Test  Page</title>
<style>body { color: red; }</style><script>var secret = "do not show";</script></head>
<body><nav>Menu</nav><h1>Hello reader</h1><p>The first paragraph &amp; more.</p>
<p>Second <b>bold</b> paragraph.</p><noscript>enable js</noscript></body></html>"""

STATES: dict[str, dict[str, Any]] = {
    "light.kitchen": {
        "entity_id": "light.kitchen",
        "state": "off",
        "attributes": {"friendly_name": "Kitchen Light"},
    },
    "sensor.outside_temperature": {
        "entity_id": "sensor.outside_temperature",
        "state": "12.5",
        "attributes": {"friendly_name": "Outside Temperature", "unit_of_measurement": "°C"},
    },
}


def _fixed(make: Any) -> Any:
    """An async handler answering ``make()`` to every request."""

    async def handler(request: web.Request) -> web.StreamResponse:
        return make()

    return handler


class FakeServices:
    """The fake services; use as a context manager or start()/stop()."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self.port = 0
        self._lock = threading.Lock()
        self._requests: list[dict[str, Any]] = []
        self.states: dict[str, dict[str, Any]] = {}
        self.pages: dict[str, str] = {}
        self.redirect_target = "http://169.254.169.254/latest/meta-data/"
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self.reset()

    # -- state ---------------------------------------------------------------------------
    def reset(self) -> None:
        with self._lock:
            self._requests = []
            self.states = json.loads(json.dumps(STATES))

    @property
    def requests(self) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(r) for r in self._requests]

    def requests_to(self, prefix: str) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["path"].startswith(prefix)]

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def settings(self, **extra: Any) -> ToolSettings:
        """Tool settings pointing at these fakes (loopback allow-listed); ``extra``: more of
        :class:`ToolSettings`'s fields."""
        return ToolSettings(**{
            "url_allowlist": "127.0.0.1",
            "weather_geocoding_url": f"{self.url}/geo/v1/search",
            "weather_forecast_url": f"{self.url}/meteo/v1/forecast",
            "wikipedia_url": f"{self.url}/wiki",
            "news_feeds": {
                "test": f"{self.url}/feeds/rss.xml",
                "atom": f"{self.url}/feeds/atom.xml",
            },
            "home_assistant_url": f"{self.url}/ha",
            "home_assistant_token": HA_TOKEN,
            "notify_webhook_url": f"{self.url}/hook",
            "ntfy_url": f"{self.url}/ntfy/voxqueue-test",
            **extra,
        })

    # -- lifecycle -----------------------------------------------------------------------
    def start(self) -> FakeServices:
        self._loop, self._thread = serve_in_thread(self._start, "fake-services")
        return self

    async def _start(self) -> None:
        self._runner = web.AppRunner(self._app(), shutdown_timeout=0.5)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.host, 0).start()
        self.port = self._runner.addresses[0][1]

    def stop(self) -> None:
        if self._loop is None or self._thread is None:
            return
        asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()
        self._loop = self._thread = None

    async def _shutdown(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    def __enter__(self) -> FakeServices:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- app -----------------------------------------------------------------------------
    def _app(self) -> web.Application:
        app = web.Application(middlewares=[self._record])
        r = app.router
        r.add_get("/geo/v1/search", self._geocode)
        r.add_get("/meteo/v1/forecast", self._forecast)
        r.add_get("/wiki/page/summary/{title}", self._wiki)
        r.add_get("/feeds/{name}", self._feed)
        r.add_get("/ha/api/states/{entity_id}", self._ha_state)
        r.add_post("/ha/api/services/{domain}/{service}", self._ha_service)
        r.add_post("/hook", self._ok)
        r.add_post("/ntfy/{topic}", self._ok)
        r.add_get(
            "/web/page.html", _fixed(lambda: web.Response(text=PAGE, content_type="text/html"))
        )
        r.add_get("/web/notes.txt", _fixed(lambda: web.Response(text="plain notes\nline two")))
        r.add_get("/web/data.json", _fixed(lambda: web.json_response({"answer": 42})))
        r.add_get(
            "/web/image.png",
            _fixed(
                lambda: web.Response(
                    body=b"\x89PNG\r\n\x1a\n" + bytes(64), content_type="image/png"
                )
            ),
        )
        r.add_get("/web/big.txt", self._big)
        r.add_get("/web/slow", self._slow)
        r.add_get("/web/redirect", self._redirect)
        r.add_get("/web/redirect-loop", self._redirect_loop)
        r.add_get("/web/missing", _fixed(lambda: web.Response(status=404, text="nope")))
        r.add_get("/web/host", self._host)
        r.add_get("/web/p/{name}", self._page)
        r.add_get("/web/collect", _fixed(lambda: web.Response(text="thanks")))
        r.add_route("*", "/moved/{port}/{tail:.*}", self._moved)
        return app

    @web.middleware
    async def _record(self, request: web.Request, handler: Any) -> web.StreamResponse:
        body = await request.read()
        entry = {
            "method": request.method,
            "path": request.path,
            "raw_path": request.raw_path,
            "query": dict(request.query),
            "headers": dict(request.headers),
            "body": body.decode("utf-8", "replace"),
            "ts": time.time(),
        }
        with self._lock:
            self._requests.append(entry)
        return await handler(request)

    async def _geocode(self, request: web.Request) -> web.Response:
        name = request.query.get("name", "").strip().lower()
        if not name:
            return web.json_response(
                {"error": True, "reason": "Parameter name is missing"}, status=400
            )
        found = PLACES.get(name)
        body: dict[str, Any] = {"generationtime_ms": 0.5}
        if found:
            body["results"] = found[: int(request.query.get("count", "10"))]
        return web.json_response(body)

    async def _forecast(self, request: web.Request) -> web.Response:
        q = request.query
        if "latitude" not in q or "longitude" not in q:
            return web.json_response({"error": True, "reason": "latitude is missing"}, status=400)
        body: dict[str, Any] = {
            "latitude": float(q["latitude"]),
            "longitude": float(q["longitude"]),
            "timezone": "Europe/Paris",
        }
        if "current" in q:
            body["current_units"] = {"temperature_2m": "°C", "wind_speed_10m": "km/h"}
            body["current"] = {
                "time": "2026-05-04T14:00",
                "interval": 900,
                "temperature_2m": 18.4,
                "apparent_temperature": 17.2,
                "relative_humidity_2m": 61,
                "weather_code": 2,
                "wind_speed_10m": 12.6,
            }
        if "daily" in q:
            days = int(q.get("forecast_days", "7"))
            if not 0 <= days <= 16:
                return web.json_response(
                    {"error": True, "reason": "forecast_days out of range"}, status=400
                )
            body["daily"] = {
                "time": [f"2026-05-{4 + i:02d}" for i in range(days)],
                "weather_code": [[0, 61, 3, 95][i % 4] for i in range(days)],
                "temperature_2m_max": [19.6 + i for i in range(days)],
                "temperature_2m_min": [11.2 + i for i in range(days)],
                "precipitation_probability_max": [10 * i for i in range(days)],
            }
        return web.json_response(body)

    async def _wiki(self, request: web.Request) -> web.Response:
        title = request.match_info["title"]
        if title == "Ada_Lovelace":
            return web.json_response(
                {
                    "type": "standard",
                    "title": "Ada Lovelace",
                    "extract": "Augusta Ada King, Countess of Lovelace, was an English "
                    "mathematician and writer. She is chiefly known for her work on "
                    "Charles Babbage's proposed mechanical general-purpose computer.",
                }
            )
        if title == "Mercury":
            return web.json_response(
                {"type": "disambiguation", "title": "Mercury", "extract": "Mercury may refer to:"}
            )
        if title == "Long_Article":
            return web.json_response(
                {
                    "type": "standard",
                    "title": "Long Article",
                    "extract": "This is a sentence. " * 100,
                }
            )
        return web.json_response(
            {
                "type": "https://mediawiki.org/wiki/HyperSwitch/errors/not_found",
                "title": "Not found.",
                "detail": "Page or revision not found.",
            },
            status=404,
        )

    async def _feed(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name == "rss.xml":
            return web.Response(text=RSS, content_type="application/rss+xml")
        if name == "atom.xml":
            return web.Response(text=ATOM, content_type="application/atom+xml")
        if name == "broken.xml":
            return web.Response(text="<html><body>not a feed", content_type="text/html")
        return web.Response(status=404)

    def _ha_authorized(self, request: web.Request) -> bool:
        return request.headers.get("Authorization") == f"Bearer {HA_TOKEN}"

    async def _ha_state(self, request: web.Request) -> web.Response:
        if not self._ha_authorized(request):
            return web.json_response({"message": "Unauthorized"}, status=401)
        state = self.states.get(request.match_info["entity_id"])
        if state is None:
            return web.json_response({"message": "Entity not found."}, status=404)
        return web.json_response(state)

    async def _ha_service(self, request: web.Request) -> web.Response:
        if not self._ha_authorized(request):
            return web.json_response({"message": "Unauthorized"}, status=401)
        domain, service = request.match_info["domain"], request.match_info["service"]
        if domain not in ("light", "switch", "homeassistant") or service not in (
            "turn_on",
            "turn_off",
            "toggle",
        ):
            return web.Response(status=400, text=f"Service {domain}.{service} not found.")
        body = await request.json() if request.body_exists else {}
        changed = []
        entity = body.get("entity_id")
        if entity in self.states:
            state = self.states[entity]
            state["state"] = "on" if service == "turn_on" else "off"
            if "brightness" in body:
                state["attributes"]["brightness"] = body["brightness"]
            changed.append(state)
        return web.json_response(changed)

    async def _ok(self, request: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    async def _big(self, request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await resp.prepare(request)
        for _ in range(64):
            await resp.write(b"x" * 16384)
        return resp

    async def _slow(self, request: web.Request) -> web.Response:
        await asyncio.sleep(float(request.query.get("s", "3")))
        return web.Response(text="finally")

    async def _redirect(self, request: web.Request) -> web.Response:
        to = request.query.get("to", self.redirect_target)
        raise web.HTTPFound(to)

    async def _moved(self, request: web.Request) -> web.Response:
        port, tail = request.match_info["port"], request.match_info["tail"]
        raise web.HTTPTemporaryRedirect(f"http://127.0.0.1:{port}/{tail}")

    async def _redirect_loop(self, request: web.Request) -> web.Response:
        raise web.HTTPFound("/web/redirect-loop")

    async def _page(self, request: web.Request) -> web.Response:
        page = self.pages.get(request.match_info["name"])
        if page is None:
            return web.Response(status=404, text="no such page")
        return web.Response(text=page, content_type="text/html")

    async def _host(self, request: web.Request) -> web.Response:
        return web.json_response({"host": request.headers.get("Host")})
