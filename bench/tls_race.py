"""How often websockets' threaded client hangs for good over TLS 1.3, side by side with
``voxqueue.tls_websocket`` (its TLS session entered by one thread at a time).

Each connection opens the fake voice's input socket over TLS (a trustme CA; the server sends
TLS 1.3 session tickets, as most do), sends an opening the voice refuses and reads the refusal
and the close: the workload on which a CI run hung. A connection that has not finished in
``--hang-s`` counts as hung (its thread is left behind). The two clients take turns, a block
of connections each. ``python -m bench.tls_race --connections 3000``
"""

from __future__ import annotations

import argparse
import json
import ssl
import threading
from collections.abc import Callable
from typing import Any

import trustme
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect as websockets_connect

from tests.fakes import FakeProviders
from voxqueue.tls_websocket import connect as serialized_connect

CLIENTS: dict[str, Callable[..., Any]] = {"websockets": websockets_connect,
                                          "serialized": serialized_connect}


def one(connect: Callable[..., Any], url: str, context: ssl.SSLContext) -> None:
    with connect(url, ssl=context, open_timeout=10,
                 additional_headers={"xi-api-key": "bench"}) as ws:
        ws.send(json.dumps({"text": "Hello"}))  # not the opening " ": refused with 1008
        try:
            while True:
                ws.recv(timeout=10)
        except ConnectionClosed:
            pass


def outcome(connect: Callable[..., Any], url: str, context: ssl.SSLContext,
            hang_s: float) -> str:
    """One connection: "ok", "failed" (an error raised) or "hung" (not over in ``hang_s``)."""
    result = ["hung"]

    def run() -> None:
        try:
            one(connect, url, context)
            result[0] = "ok"
        except Exception:
            result[0] = "failed"

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(hang_s)
    return "hung" if thread.is_alive() else result[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=3000, help="per client")
    parser.add_argument("--block", type=int, default=250, help="connections per turn")
    parser.add_argument("--hang-s", type=float, default=20.0)
    args = parser.parse_args()

    ca = trustme.CA()
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server)
    client = ssl.create_default_context()
    ca.configure_trust(client)
    done = dict.fromkeys(CLIENTS, 0)
    hung = dict.fromkeys(CLIENTS, 0)
    failed = dict.fromkeys(CLIENTS, 0)
    with FakeProviders(ssl_context=server) as fake:
        url = (fake.elevenlabs_base_url.replace("https", "wss", 1)
               + "/v1/text-to-speech/v1/stream-input?output_format=pcm_16000")
        while min(done.values()) < args.connections:
            for name, connect in CLIENTS.items():
                for _ in range(min(args.block, args.connections - done[name])):
                    ended = outcome(connect, url, client, args.hang_s)
                    hung[name] += ended == "hung"
                    failed[name] += ended == "failed"
                    done[name] += 1
            print("  " + ", ".join(f"{n}: {hung[n]} hung in {done[n]}" for n in CLIENTS),
                  flush=True)
    for name in CLIENTS:
        print(f"{name}: {hung[name]} of {done[name]} connections hung (more than "
              f"{args.hang_s:g} s), {failed[name]} failed with an error")


if __name__ == "__main__":
    main()
