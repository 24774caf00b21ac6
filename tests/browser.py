"""A headless Chromium from the system's packages, driven over its DevTools protocol with the
``websockets`` client voxqueue already depends on (no WebDriver to install)."""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from contextlib import ExitStack
from types import TracebackType
from typing import Any

from websockets.sync.client import connect

from tests.conftest import free_port

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def chromium() -> str | None:
    """The browser's path, or None when the system has none."""
    return next((path for name in CANDIDATES if (path := shutil.which(name))), None)


class Browser:
    """One headless page: ``open`` a URL (with extra headers), ``evaluate`` JavaScript in it."""

    def __init__(self, binary: str) -> None:
        self.port = free_port()
        self.profile = tempfile.TemporaryDirectory(prefix="vq-chromium-")
        self.proc = subprocess.Popen(
            [binary, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
             f"--remote-debugging-port={self.port}", f"--user-data-dir={self.profile.name}",
             "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._ids = itertools.count(1)
        self._open = ExitStack()
        self.ws = self._open.enter_context(connect(self._page_socket(), max_size=None))

    def _page_socket(self, timeout: float = 30) -> str:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/json/list",
                                            timeout=2) as answer:
                    pages = [t for t in json.loads(answer.read()) if t.get("type") == "page"]
                if pages:
                    return str(pages[0]["webSocketDebuggerUrl"])
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("Chromium did not open its DevTools port")
            time.sleep(0.2)

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        ident = next(self._ids)
        self.ws.send(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv(timeout=30))
            if message.get("id") == ident:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return dict(message.get("result", {}))

    def open(self, url: str, headers: dict[str, str] | None = None) -> None:
        self.call("Network.enable")
        if headers:
            self.call("Network.setExtraHTTPHeaders", headers=headers)
        self.call("Page.navigate", url=url)

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return result.get("result", {}).get("value")

    def wait_for(self, expression: str, timeout: float = 30) -> Any:
        """The expression's value once it is truthy."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value or time.monotonic() > deadline:
                return value
            time.sleep(0.25)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._open.close()
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.profile.cleanup()
