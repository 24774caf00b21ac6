"""A TCP proxy in front of Redis that adds a set one-way delay, as a remote host would.

Every byte from a client reaches Redis ``delay_s`` later, and every reply reaches the client
``delay_s`` later: one round trip costs ``2 * delay_s`` more, as for a worker on another host.
Order is kept per direction. It can also log every command it passes (``record=True``), with
its time and connection, to find what a turn waits on.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from dataclasses import dataclass, field


@dataclass
class Command:
    at: float
    conn: int
    words: list[str]


@dataclass
class DelayProxy:
    target_host: str
    target_port: int
    delay_s: float = 0.0
    record: bool = False
    port: int = 0
    commands: list[Command] = field(default_factory=list)
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None
    _server: asyncio.AbstractServer | None = None
    _conns: int = 0

    def start(self) -> DelayProxy:
        ready = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            self._server = loop.run_until_complete(
                asyncio.start_server(self._serve, "127.0.0.1", self.port))
            self.port = self._server.sockets[0].getsockname()[1]
            ready.set()
            loop.run_forever()

        self._thread = threading.Thread(target=run, name="redis-delay", daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    def stop(self) -> None:
        loop = self._loop
        if loop is None:
            return

        async def shutdown() -> None:
            if self._server is not None:
                self._server.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(shutdown(), loop).result(5)
        loop.call_soon_threadsafe(loop.stop)

    def set_delay(self, delay_s: float) -> None:
        self.delay_s = delay_s

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    async def _serve(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        self._conns += 1
        conn = self._conns
        try:
            server_r, server_w = await asyncio.open_connection(self.target_host, self.target_port)
        except OSError:
            client_w.close()
            return
        for w in (client_w, server_w):
            sock = w.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        await asyncio.gather(self._pump(client_r, server_w, conn),
                             self._pump(server_r, client_w, None), return_exceptions=True)

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    conn: int | None) -> None:
        """Forward ``reader`` to ``writer``, each piece ``delay_s`` after it arrived."""
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def send() -> None:
            while True:
                due, data = await queue.get()
                if not data:
                    break
                wait = due - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                writer.write(data)
                await writer.drain()
            with contextlib.suppress(OSError):
                writer.close()

        sender = asyncio.create_task(send())
        try:
            while data := await reader.read(65536):
                if conn is not None and self.record:
                    self.commands.append(Command(time.time(), conn, _words(data)))
                queue.put_nowait((time.monotonic() + self.delay_s, data))
        except OSError:
            pass
        queue.put_nowait((0.0, b""))
        await sender


def _words(data: bytes) -> list[str]:
    """The command names in a piece of RESP (several for a pipeline)."""
    out: list[str] = []
    lines = data.split(b"\r\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith(b"*") and i + 2 < len(lines) and lines[i + 1].startswith(b"$"):
            name = lines[i + 2].decode(errors="replace").upper()
            if name in ("EVALSHA", "EVAL") and i + 4 < len(lines):
                name += f" {lines[i + 4].decode(errors='replace')[:8]}"
            out.append(name)
            i += 3
        else:
            i += 1
    return out


def measured_rtt_s(proxy: DelayProxy, n: int = 50) -> float:
    """The round trip one PING takes through the proxy now (median of ``n``)."""
    import redis

    client = redis.Redis.from_url(proxy.url())
    client.ping()
    times = []
    for _ in range(n):
        t = time.perf_counter()
        client.ping()
        times.append(time.perf_counter() - t)
    client.close()
    times.sort()
    return times[len(times) // 2]
