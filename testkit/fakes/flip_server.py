"""A local HTTP server whose answer a test changes (status, body, delay): a site to monitor."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class FlipServer:
    """A local HTTP server whose answer the test changes: status, body, delay."""

    def __init__(self) -> None:
        self.status, self.body, self.delay = 200, b"all good", 0.0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                time.sleep(server.delay)
                self.send_response(server.status)
                self.send_header(
                    "Content-Type", "application/json" if server.body[:1] in b"{[" else "text/plain"
                )
                self.send_header("Content-Length", str(len(server.body)))
                self.end_headers()
                self.wfile.write(server.body)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/health"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
