"""What one connection to the voice per turn would save: the floor's two shapes side by side.

    .venv/bin/python -m bench.voice_connection [--rounds 3] [--turns 60] [--concurrency 12]

Issue #19's remaining lever, measured before it is built. On the floor's worker processes
(``bench.cpu_floor``: voxqueue's Celery settings, default pools and processes, none of its
guarantees), with the fake providers at ``bench.latency``'s profile and the piece texts and
audio chunks of a real turn of this checkout, alternating in each round:

- **a request per piece** (today's shape): the agent's step reads the model's stream and sends
  a TTS task per piece; each opens an HTTP stream to the voice through the official SDK;
- **one connection per turn**: the first piece starts the turn's one TTS task, which opens
  ElevenLabs' multi-context input stream (``bench/voice_contexts.py``: a context per piece,
  the socket read on the task's thread so that a read after a pause takes every frame that
  piled up) and is fed the later pieces through a Redis list, the audio coming back as base64
  in JSON messages.

Both read with the floor's pauses (0.2 s after a read that waited). Prints the workers' CPU
per turn (and wake-ups) of each shape, medians over the rounds, and their ratio.
"""

from __future__ import annotations

import argparse
import statistics
import time

from bench import cpu_floor
from bench.cpu_per_turn import audio_chunks, floor_cpu, piece_texts
from bench.harness import bench_system
from bench.latency import PROFILE, REPLY, run_turns
from tests.conftest import system_env
from voxqueue.process_table import DEFAULT_PROCESSES

SHAPES = {"a request per piece": False, "one connection per turn": True}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--turns", type=int, default=60)
    parser.add_argument("--concurrency", type=int, default=12)
    args = parser.parse_args()
    args.profile = None  # (floor_cpu's py-spy option: not here)
    runs: dict[str, list[dict[str, float]]] = {shape: [] for shape in SHAPES}
    with bench_system(PROFILE, separate_fake=True, processes=DEFAULT_PROCESSES) as system:
        system.fake.script_chat({"repeat": True, "content": REPLY})
        turns, _ = run_turns(system, 3, 1, lambda i: system.client.ask(
            "weather tomorrow", session=f"v{i}"))
        sentences, pieces = audio_chunks(turns[-1]), piece_texts(turns[-1])
        url = system.sup.settings.redis_url.rsplit("/", 1)[0] + "/1"
        procs = cpu_floor.start_workers(url, system.sup.log_dir,
                                        env=system_env(url, system.fake))
        try:
            time.sleep(6)  # the floor workers' start-up
            for n in range(args.rounds):
                order = list(SHAPES) if n % 2 == 0 else list(reversed(SHAPES))
                for shape in order:
                    runs[shape].append(floor_cpu(system, procs, url, sentences, args, pieces,
                                                 pause_s=cpu_floor.PAUSE_S,
                                                 one_connection=SHAPES[shape]))
                print(f"round {n + 1} done", flush=True)
        finally:
            for proc in procs:
                proc.terminate()
                proc.wait(15)
    print(f"\n{args.rounds} rounds of {args.turns} turns, {args.concurrency} at a time; "
          f"{len(pieces)} pieces, {sum(map(sum, sentences)) // 1000} KB of audio a turn "
          "(medians)")
    print("| shape | workers' CPU ms per turn | wake-ups per turn | fake providers' CPU ms | "
          "Redis CPU ms |")
    print("|---|---|---|---|---|")
    med = {shape: {k: statistics.median(r[k] for r in rs) for k in rs[0]}
           for shape, rs in runs.items()}
    for shape, m in med.items():
        print(f"| {shape} | {m['workers']:.1f} | {m['workers_wake_ups']:.0f} | "
              f"{m['fake providers']:.1f} | {m['redis']:.1f} |")
    a, b = (med[s]["workers"] for s in SHAPES)
    rounds = [one["workers"] / per["workers"] for per, one in zip(*runs.values(), strict=True)]
    print(f"\none connection per turn / a request per piece, the workers' CPU: {b / a:.2f} "
          f"({a - b:+.1f} ms per turn saved; each round: "
          f"{', '.join(f'{x:.2f}' for x in rounds)})")


if __name__ == "__main__":
    main()
