"""How throughput grows with worker processes on one queue.

    .venv/bin/python -m bench.scaling [--jobs 24]

The ``tts`` queue with 1, 2 and 4 worker processes (one task at a time each), against:
- a CPU-bound provider: the offline Piper voice, synthesizing on this machine's cores;
- an I/O-bound provider: the fake ElevenLabs server, which waits (time to first byte and a
  real-time factor) without using the CPU.
Each job is one sentence spoken through ``Client.speak`` (the turn goes straight to TTS).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from pathlib import Path

from testkit import RedisServer, system_env
from testkit.fakes import FakeProviders
from voxqueue.client.direct import Client
from voxqueue.settings import RedisSettings, Settings
from voxqueue.up.supervisor import Supervisor

SENTENCE = "The quick brown fox jumps over the lazy dog near the river bank."


def throughput(processes: int, jobs: int, env_extra: dict[str, str], fake: object | None) -> float:
    server = RedisServer()
    server.start()
    try:
        env = system_env(server.url, fake, VOXQUEUE_LOG_LEVEL="WARNING", **env_extra)
        settings = Settings(redis=RedisSettings(url=server.url))
        sup = Supervisor(settings, env=env, log_dir=Path(tempfile.mkdtemp(prefix="vq-scale-")))
        try:
            for i in range(processes):
                sup.start(f"tts-{i}", sup.worker_argv(["tts"], name=f"tts{i}", pool="prefork",
                                                      concurrency=1))
            sup.wait_for_workers(["tts"], timeout=120)
            with Client(settings) as client:
                client.speak("Warming up the voice.").wait(timeout=120)  # loads models
                for _ in range(processes):
                    client.speak("Warm.").wait(timeout=120)
                started = time.perf_counter()
                turns = [client.speak(SENTENCE, deadline_s=600) for _ in range(jobs)]
                errors = []

                def wait(turn):
                    if turn.wait(timeout=600).status != "ok":
                        errors.append(turn.turn_id)

                threads = [threading.Thread(target=wait, args=(t,)) for t in turns]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                elapsed = time.perf_counter() - started
                if errors:
                    raise RuntimeError(f"{len(errors)} jobs failed")
                return jobs / elapsed
        finally:
            sup.stop_all()
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=24)
    args = parser.parse_args()
    print(f"cores: {os.cpu_count()}, jobs per run: {args.jobs}")
    rows = []
    with FakeProviders() as fake:
        fake.set_profile(tts_ttfb_s=0.2, tts_rtf=0.5)
        # One onnxruntime thread per process: the processes, not Piper, share out the cores.
        piper = {"VOXQUEUE_TTS": "piper", "VOXQUEUE_PIPER_THREADS": "1"}
        for kind, env, fk in (("CPU-bound (Piper, offline, 1 thread each)", piper, None),
                              ("I/O-bound (fake ElevenLabs)", {"VOXQUEUE_TTS": "elevenlabs"},
                               fake)):
            base = None
            for n in (1, 2, 4):
                rate = throughput(n, args.jobs, env, fk)
                base = base or rate
                rows.append((kind, n, rate, rate / base))
                print(f"  {kind}: {n} process(es) → {rate:.2f} jobs/s", flush=True)
    print()
    print("| provider | worker processes | sentences/s | vs 1 process |")
    print("|---|---|---|---|")
    for kind, n, rate, ratio in rows:
        print(f"| {kind} | {n} | {rate:.2f} | {ratio:.2f}× |")


if __name__ == "__main__":
    main()
