"""The browser page as the gateway serves it (``voxqueue.gateway.page``): its own files only,
each with the headers that keep it to its gateway; shipped in the package; the pairing link
``voxqueue devices add --link`` prints. The page at work is tests/integration/
test_browser_device.py, in a real browser."""

from __future__ import annotations

import tomllib
from pathlib import Path

from starlette.applications import Starlette
from starlette.testclient import TestClient

from voxqueue.cli.gateway import pairing_link
from voxqueue.gateway.app import subprotocol_token
from voxqueue.gateway.page import FILES, page_file, page_routes

ROOT = Path(__file__).resolve().parents[2]


def test_only_the_page_s_own_files_are_served_with_its_headers():
    client = TestClient(Starlette(routes=page_routes()))
    for path in ("/", "/page/app.js", "/page/style.css"):
        answer = client.get(path)
        assert answer.status_code == 200, path
        csp = answer.headers["content-security-policy"]
        assert "default-src 'none'" in csp and "connect-src 'self'" in csp
        assert "frame-ancestors 'none'" in csp and "base-uri 'none'" in csp
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert answer.headers["referrer-policy"] == "no-referrer"
    assert client.get("/page/app.js").headers["content-type"].startswith("text/javascript")
    for path in ("/page/nope.js", "/page/..%2F__init__.py", "/page/page.py"):
        assert client.get(path).status_code == 404, path


def test_the_page_ships_in_the_package():
    shipped = {p.name for p in (ROOT / "voxqueue" / "gateway" / "page").iterdir()}
    assert shipped == set(FILES)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "gateway/page/*" in project["tool"]["setuptools"]["package-data"]["voxqueue"]
    size = sum(len(page_file(name)) for name in FILES)
    print(f"\nthe page: {len(FILES)} files, {size} bytes")
    assert size < 100_000


def test_the_pairing_link_carries_the_token_in_its_fragment_only():
    assert pairing_link("https://voice.home.lan", "vqd_abc") == "https://voice.home.lan/#token=vqd_abc"
    assert pairing_link("http://127.0.0.1:8765/", "vqd_abc") == "http://127.0.0.1:8765/#token=vqd_abc"


def test_a_token_offered_as_a_websocket_subprotocol():
    assert subprotocol_token("voxqueue.v1, voxqueue.token.vqd_abc") == "vqd_abc"
    assert subprotocol_token("voxqueue.v1") is None
    assert subprotocol_token("voxqueue.token.nope") is None  # not a device token
    assert subprotocol_token("voxqueue.token.vqd_a, voxqueue.token.vqd_b") is None
