"""The browser page: from the end of speech to the first reply audio heard, against a Python
device sending the same command through the same gateway.

    .venv/bin/python -m bench.browser_first_audio [--rounds 4]

Real worker processes with the offline engines (pocketsphinx, local intents, Piper), a private
Redis, ``voxqueue gateway`` in its own process. Each round, alternating: a new headless
Chromium (``testkit.browser``) opens the page by a device's pairing link, its fake microphone
plays ``command_time.wav`` ("What time is it"), one press of Talk; its figures from the page's
own clock (``#app``'s data attributes): the last voiced frame → the first reply audio heard
(scheduled on Web Audio, with its output latency), the silence it waited for, and the
command's end (sent) → heard. Then the Python client (``GatewayClient.stream``) sends the same
recording at the pace of speech up to the last loud frame + 0.7 s of silence (the usual
trailing silence; it does not read partial transcripts) and ends it: the last loud frame sent →
the first reply audio in hand, and the end (sent) → in hand. Needs Chromium (``apt install
chromium``).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
import wave
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
from pydantic import SecretStr

from bench.harness import BenchSystem, bench_system
from testkit import ROOT, SPEECH
from testkit.browser import Browser, chromium
from testkit.system import free_port
from voxqueue.audio import rms
from voxqueue.client.gateway import GatewayClient
from voxqueue.settings import GatewaySettings, RedisSettings, Settings

WAV = SPEECH / "command_time.wav"
FRAME = 640  # 20 ms of 16 kHz 16-bit PCM
TRAILING_S = 0.7
CLI = [sys.executable, "-m", "voxqueue.cli"]


@contextmanager
def gateway(system: BenchSystem) -> Iterator[tuple[str, dict[str, str]]]:
    """``voxqueue gateway`` on a free port: its URL and environment."""
    port = free_port()
    env = {**system.sup.env, "VOXQUEUE_GATEWAY_TURNS_PER_MINUTE": "600"}
    proc = subprocess.Popen([*CLI, "gateway", "--port", str(port)], env=env, cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(150):
            try:
                if httpx.get(f"{url}/v1/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        yield url, env
    finally:
        proc.terminate()
        proc.wait(10)


def add_device(env: dict[str, str], name: str, *link: str) -> str:
    done = subprocess.run([*CLI, "devices", "add", name, *link], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=30, check=True)
    return done.stdout.strip().splitlines()[0]


def page_once(binary: str, url: str, env: dict[str, str], n: int) -> dict[str, Any]:
    """One spoken command on the page, in a browser of its own (its microphone starts over)."""
    address = add_device(env, f"page-{n}", "--link", "--url", url)
    with Browser(binary, "--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream",
                 f"--use-file-for-fake-audio-capture={WAV}%noloop",
                 "--autoplay-policy=no-user-gesture-required") as browser:
        browser.open(address)
        if not browser.wait_for("document.getElementById('app')?.dataset.state === 'ready'", 20):
            raise RuntimeError("the page did not pair")
        browser.evaluate("document.getElementById('talk').click()", gesture=True)
        if not browser.wait_for("document.getElementById('app').dataset.turns === '1'", 90):
            raise RuntimeError(f"no answer: {browser.console}")
        found = browser.evaluate("({...document.getElementById('app').dataset})")
    return {"speech_end_ms": float(found["speechToSoundMs"]),
            "end_ms": float(found["endToSoundMs"]), "ended_by": found["endedBy"]}


def python_once(url: str, env: dict[str, str], n: int, pcm: bytes) -> dict[str, float]:
    """The same command from the Python client, ended after 0.7 s of silence: from its last
    loud frame sent, and from its end (sent), to the first reply audio in hand, ms."""
    frames = [pcm[i:i + FRAME] for i in range(0, len(pcm), FRAME)]
    loud = max(i for i, f in enumerate(frames) if rms(f) > 300)
    send = frames[:loud + 1 + int(TRAILING_S / 0.02)]
    token = add_device(env, f"python-{n}")
    settings = Settings(gateway=GatewaySettings(url=url, device_token=SecretStr(token)),
                        redis=RedisSettings(url="redis://127.0.0.1:1/0"))
    with GatewayClient(settings) as client:
        stream = client.stream(session="bench")
        start = time.monotonic()
        for i, frame in enumerate(send):  # at the pace of speech
            time.sleep(max(0.0, start + i * 0.02 - time.monotonic()))
            stream.write(frame)
            if i == loud:
                spoken = time.perf_counter()
        ended = time.perf_counter()
        turn = stream.end((loud + 1) * 0.02)
        first = next(iter(turn.playback(timeout=60)))
        heard = time.perf_counter()
        assert first
        turn.wait(timeout=60)
    return {"speech_end_ms": (heard - spoken) * 1000, "end_ms": (heard - ended) * 1000}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    binary = chromium()
    if binary is None:
        raise SystemExit("no Chromium here (apt install chromium)")
    with wave.open(str(WAV)) as w:
        pcm = w.readframes(w.getnframes())
    runs: dict[str, list[dict[str, Any]]] = {"page": [], "python": []}
    with bench_system(None, offline=True, queues=("stt", "agent", "tools", "tts"),
                      VOXQUEUE_STT="pocketsphinx") as system, gateway(system) as (url, env):
        page_once(binary, url, env, 0)  # warm every model and path once
        python_once(url, env, 0, pcm)
        for r in range(1, args.rounds + 1):
            for side in (("page", "python") if r % 2 else ("python", "page")):
                run = (page_once(binary, url, env, r) if side == "page"
                       else python_once(url, env, r, pcm))
                runs[side].append(run)
                print(f"{side}: {run}", flush=True)

    def p50(side: str, key: str) -> float:
        return statistics.median(float(r[key]) for r in runs[side])

    print(f"\nms, p50 of {args.rounds} each; the page ended its commands by "
          f"{sorted({str(r['ended_by']) for r in runs['page']})}")
    print("| device | speech end → first audio | silence waited | command's end (sent) → "
          "first audio | speech end → first audio, / Python |")
    print("|---|---|---|---|---|")
    python = p50("python", "speech_end_ms")
    for side, name in (("page", "the browser page (heard)"),
                       ("python", "Python client, `GatewayClient.stream` (in hand)")):
        first, end = p50(side, "speech_end_ms"), p50(side, "end_ms")
        print(f"| {name} | {first:.0f} | {first - end:.0f} | {end:.0f} | {first / python:.2f} |")


if __name__ == "__main__":
    main()
