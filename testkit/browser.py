"""A headless Chromium from the system's packages, driven over its DevTools protocol with the
``websockets`` client voxqueue already depends on (no WebDriver to install): pages opened,
JavaScript evaluated (with a user's gesture, awaiting promises), the console's warnings and
errors kept, screenshots taken."""

from __future__ import annotations

import base64
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

from testkit.system import free_port

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def chromium() -> str | None:
    """The browser's path, or None when the system has none."""
    return next((path for name in CANDIDATES if (path := shutil.which(name))), None)


class Browser:
    """One headless page: ``open`` a URL (with extra headers), ``evaluate`` JavaScript in it;
    ``console`` holds the page's warnings, errors and uncaught exceptions (CSP violations
    among them). ``args``: more of Chromium's switches (a fake microphone, say)."""

    def __init__(self, binary: str, *args: str) -> None:
        self.port = free_port()
        self.profile = tempfile.TemporaryDirectory(prefix="vq-chromium-")
        self.proc = subprocess.Popen(
            [binary, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
             f"--remote-debugging-port={self.port}", f"--user-data-dir={self.profile.name}",
             *args, "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.console: list[str] = []
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
            message = json.loads(self.ws.recv(timeout=60))
            self._note(message)
            if message.get("id") == ident:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return dict(message.get("result", {}))

    def _note(self, message: dict[str, Any]) -> None:
        """Keep the console's warnings and errors (events arrive between the answers)."""
        method, params = message.get("method"), message.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "warning"):
            self.console.append(" ".join(str(a.get("value", a.get("description", "")))
                                         for a in params.get("args", [])))
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            self.console.append(str(details.get("exception", {}).get("description")
                                    or details.get("text")))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") in (
                "error", "warning"):
            entry = params["entry"]
            self.console.append(f"{entry.get('source')}: {entry.get('text')} "
                                f"{entry.get('url', '')}")

    def open(self, url: str, headers: dict[str, str] | None = None) -> None:
        self.call("Network.enable")
        self.call("Runtime.enable")
        self.call("Log.enable")
        if headers:
            self.call("Network.setExtraHTTPHeaders", headers=headers)
        self.call("Page.navigate", url=url)

    def evaluate(self, expression: str, *, gesture: bool = False) -> Any:
        """The expression's value (a promise's, once it settles); ``gesture``: as if the
        person had clicked (what a page needs to start audio)."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True,
                           awaitPromise=True, userGesture=gesture)
        if "exceptionDetails" in result:
            raise RuntimeError(result["exceptionDetails"].get("exception", {}).get(
                "description") or result["exceptionDetails"].get("text"))
        return result.get("result", {}).get("value")

    def press(self, key: str, code: str, key_code: int) -> None:
        """A key pressed and released, as a person's (``" ", "Space", 32``)."""
        for kind in ("keyDown", "keyUp"):
            self.call("Input.dispatchKeyEvent", type=kind, key=key, code=code,
                      windowsVirtualKeyCode=key_code, text=key if kind == "keyDown" else "")

    def screenshot(self, path: str) -> None:
        """The page as it is now, as a PNG file."""
        data = self.call("Page.captureScreenshot", format="png")["data"]
        with open(path, "wb") as out:
            out.write(base64.b64decode(data))

    def viewport(self, width: int, height: int, *, mobile: bool = False) -> None:
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height,
                  deviceScaleFactor=2 if mobile else 1, mobile=mobile)

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
