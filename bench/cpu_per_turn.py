"""Where a turn's CPU goes, against its floor, and what an idle system spends.

    .venv/bin/python -m bench.cpu_per_turn [--turns 60] [--concurrency 12] [--idle-s 20]
        [--env VOXQUEUE_X=value ...]

Everything ``voxqueue up`` runs (the workers with their default pools and processes, beat, the
metrics exporter, Flower) on a private Redis, with the fake providers (``bench.latency``'s
profile) in a process of their own. In one run:

1. idle: CPU ms per second of each process, nothing asked;
2. typed questions with a three-sentence spoken reply, N at C concurrently: CPU ms per turn by
   process, from ``/proc``, and how often its threads gave up the CPU (context switches: each
   a wake-up, to a read that waited, a sleep, the interpreter lock) with the CPU per wake-up,
   and how much of it the main thread spent (in a worker, Celery's consumer loop: the takes,
   acks and task events; the tasks run on the pool's threads);
3. the floor (``bench.cpu_floor``): a bare Celery chain with the same hops (the agent's step,
   one task per sentence) on worker processes like ours, relaying the same audio bytes in the
   same chunks, read by the client the same way: CPU ms per turn, and ours as a multiple of it;
4. the floor with the providers' streams: the same chain, its agent step reading the model's
   reply and its TTS tasks the voice's audio from the fake providers through the official SDKs,
   each piece as it arrives (``bench.cpu_floor``): what moving the providers' streams costs
   with none of our guarantees, and ours as a multiple of that; and the same with a 0.2 s
   pause after every read (our longest), the fewest wake-ups such reading can have.

"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import cpu_floor
from bench.harness import (
    BenchSystem,
    bench_system,
    context_switches,
    cpu_seconds,
    main_thread_cpu_seconds,
)
from bench.latency import PROFILE, REPLY, run_turns
from testkit import free_port, system_env
from voxqueue.up.process_table import DEFAULT_PROCESSES


def start_like_up(system: BenchSystem) -> None:
    """Beat, the exporter and Flower beside the workers, as ``voxqueue up`` starts them."""
    sup = system.sup
    sup.settings = sup.settings.replace(dashboard={"flower_port": free_port()})
    for name, argv, env in (
            ("beat", sup.beat_argv("WARNING"), None),
            ("exporter", [sys.executable, "-m", "voxqueue.cli", "exporter", "--port",
                          str(free_port())], None),
            ("flower", sup.flower_argv(), sup.flower_env())):
        proc = sup.start(name, argv, env)
        system.pids[name] = proc.popen.pid
    time.sleep(8)  # their start-up is not idle time


def cpu_per(pids: dict[str, int], run: Callable[[], Any],
            per: float) -> tuple[dict[str, float], dict[str, float], dict[str, float]]:
    """CPU ms, context switches and the main thread's CPU ms of each process while ``run``
    runs, divided by ``per``."""
    before = {role: (cpu_seconds(pid), context_switches(pid), main_thread_cpu_seconds(pid))
              for role, pid in pids.items()}
    run()
    cpu = {role: (cpu_seconds(pid) - before[role][0]) * 1000 / per for role, pid in pids.items()}
    switches = {role: (context_switches(pid) - before[role][1]) / per
                for role, pid in pids.items()}
    main = {role: (main_thread_cpu_seconds(pid) - before[role][2]) * 1000 / per
            for role, pid in pids.items()}
    return cpu, switches, main


def setting(pair: str) -> str:
    """``VOXQUEUE_X=value``, as given; anything else is refused."""
    name, sep, _ = pair.partition("=")
    if not sep or not name.startswith("VOXQUEUE_"):
        raise argparse.ArgumentTypeError(f"expected VOXQUEUE_X=value, got {pair!r}")
    return pair


def by_role(cpu: dict[str, float]) -> dict[str, float]:
    """A queue's processes (``tts``, ``tts-2``…) together."""
    out: dict[str, float] = {}
    for role, ms in cpu.items():
        key = role.split("-")[0] if role.split("-")[-1].isdigit() else role
        out[key] = out.get(key, 0.0) + ms
    return out


OURS = ("stt", "agent", "tools", "tts", "monitor", "beat", "exporter", "flower")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=60)
    parser.add_argument("--concurrency", type=int, default=12)
    parser.add_argument("--idle-s", type=float, default=20.0)
    parser.add_argument("--json", type=Path, default=None,
                        help="also write the figures to this file (bench.cpu_before_after)")
    parser.add_argument("--env", action="append", default=[], type=setting,
                        metavar="VOXQUEUE_X=value",
                        help="a setting for every process of the run (repeatable)")
    args = parser.parse_args()
    env = dict(pair.split("=", 1) for pair in args.env)
    with bench_system(PROFILE, separate_fake=True, processes=DEFAULT_PROCESSES,
                      **env) as system:
        start_like_up(system)
        system.fake.script_chat({"repeat": True, "content": REPLY})
        idle = by_role(cpu_per(system.pids, lambda: time.sleep(args.idle_s), args.idle_s)[0])
        run_turns(system, 4, 2, lambda i: system.client.ask("warm up", session=f"w{i}"))
        turns: list[Any] = []

        def ours() -> None:
            turns.extend(run_turns(system, args.turns, args.concurrency,
                                   lambda i: system.client.ask("weather tomorrow",
                                                               session=f"c{i}"))[0])

        real, switches, main_thread = map(by_role, cpu_per(system.pids, ours, args.turns))
        sentences, pieces = audio_chunks(turns[0]), piece_texts(turns[0])
        # The same Redis server, another database: the floor's queues are not ours.
        url = system.sup.settings.redis.url.rsplit("/", 1)[0] + "/1"
        floor_procs = cpu_floor.start_workers(url, system.sup.log_dir,
                                              env=system_env(url, system.fake))
        try:
            time.sleep(6)  # the floor workers' start-up
            floor = floor_cpu(system, floor_procs, url, sentences, args)
            floor_read = floor_cpu(system, floor_procs, url, sentences, args, pieces)
            floor_paused = floor_cpu(system, floor_procs, url, sentences, args, pieces,
                                     pause_s=cpu_floor.PAUSE_S)
        finally:
            for proc in floor_procs:
                proc.terminate()
                proc.wait(15)
    report(idle, real, switches, main_thread, floor, floor_read, floor_paused, sentences, args)
    if args.json:
        args.json.write_text(json.dumps({"idle": idle, "per_turn": real, "floor": floor,
                                         "floor_read": floor_read,
                                         "floor_paused": floor_paused,
                                         "switches": switches, "main_thread": main_thread,
                                         "ours": list(OURS)}))


def audio_chunks(turn: Any) -> list[list[int]]:
    """A turn's audio chunk sizes, per sentence."""
    per: dict[int, list[int]] = {}
    for entry in turn._entries:
        if entry.event.type == "tts-chunk" and entry.pcm is not None:
            per.setdefault(int(entry.event.data.get("seq", 0)), []).append(len(entry.pcm))
    return [per[k] for k in sorted(per)]


def piece_texts(turn: Any) -> list[str]:
    """The texts a turn's TTS jobs were given, in order."""
    texts = {int(e.event.data["seq"]): str(e.event.data["text"]) for e in turn._entries
             if e.event.type == "tts-start"}
    return [texts[k] for k in sorted(texts)]


def floor_cpu(system: BenchSystem, procs: list[Any], url: str, sentences: list[list[int]],
              args: argparse.Namespace, pieces: list[str] | None = None,
              pause_s: float = 0.0) -> dict[str, float]:
    """The floor's CPU per turn; with ``pieces``, the floor with the providers' streams."""
    import redis

    sender = cpu_floor.sender_for(url)
    r = redis.Redis.from_url(url)
    for _ in range(4):  # warm-up
        cpu_floor.run_turn(sender, r, uuid.uuid4().hex, sentences, pieces=pieces,
                           pause_s=pause_s)
    pids = {f"floor-{i}": p.pid for i, p in enumerate(procs)}
    pids |= {"redis": system.pids["redis"], "benchmark (listeners)": system.pids[
        "benchmark (listeners)"], "fake providers": system.pids["fake providers"]}

    def run() -> None:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(args.concurrency) as pool:
            list(pool.map(lambda _: cpu_floor.run_turn(
                sender, r, uuid.uuid4().hex, sentences, pieces=pieces, pause_s=pause_s),
                range(args.turns)))

    cpu, woke, main = cpu_per(pids, run, args.turns)
    return {"workers": sum(v for k, v in cpu.items() if k.startswith("floor")),
            "workers_wake_ups": sum(v for k, v in woke.items() if k.startswith("floor")),
            "workers_main_thread": sum(v for k, v in main.items() if k.startswith("floor")),
            "redis": cpu["redis"], "benchmark (listeners)": cpu["benchmark (listeners)"],
            "fake providers": cpu["fake providers"]}


def report(idle: dict[str, float], real: dict[str, float], switches: dict[str, float],
           main_thread: dict[str, float], floor: dict[str, float],
           floor_read: dict[str, float], floor_paused: dict[str, float],
           sentences: list[list[int]],
           args: argparse.Namespace) -> None:
    audio = sum(map(sum, sentences))
    print(f"\n{args.turns} typed turns, {args.concurrency} at a time, a "
          f"{len(sentences)}-piece reply ({audio // 1000} KB of audio in "
          f"{sum(map(len, sentences))} chunks); idle over {args.idle_s:g} s"
          + (f"; {' '.join(args.env)}" if args.env else ""))
    print("| process | idle, CPU ms per s | CPU ms per turn | of it, main thread | "
          "wake-ups per turn | CPU µs per wake-up |")
    print("|---|---|---|---|---|---|")
    for role in sorted(real, key=lambda k: -real[k]):
        woke = switches.get(role, 0.0)
        print(f"| {role} | {idle.get(role, 0.0):.1f} | {real[role]:.1f} | "
              f"{main_thread.get(role, 0.0):.1f} | {woke:.0f} | "
              f"{real[role] * 1000 / woke if woke else 0:.0f} |")
    ours = sum(v for k, v in real.items() if k in OURS)
    ours_idle = sum(v for k, v in idle.items() if k in OURS)
    ours_woke = sum(v for k, v in switches.items() if k in OURS)
    ours_main = sum(v for k, v in main_thread.items() if k in OURS)
    print(f"| **our processes** | **{ours_idle:.1f}** | **{ours:.1f}** | **{ours_main:.1f}** | "
          f"**{ours_woke:.0f}** | **{ours * 1000 / max(ours_woke, 1e-9):.0f}** |")
    print(f"\nfloor (bare Celery chain of the same hops relaying the same bytes), CPU ms per "
          f"turn: workers {floor['workers']:.1f} (in {floor['workers_wake_ups']:.0f} wake-ups; "
          f"their main threads {floor['workers_main_thread']:.1f}), "
          f"Redis {floor['redis']:.1f}, client {floor['benchmark (listeners)']:.1f}")
    print(f"our processes per turn / the floor's workers: {ours / floor['workers']:.1f}x; "
          f"Redis: {real.get('redis', 0.0) / max(floor['redis'], 1e-9):.1f}x")
    print(f"floor with the providers' streams (the same chain reading the model's and the "
          f"voice's streams through the SDKs, each piece as it arrives), CPU ms per turn: "
          f"workers {floor_read['workers']:.1f} (in {floor_read['workers_wake_ups']:.0f} "
          f"wake-ups; main threads {floor_read['workers_main_thread']:.1f}), "
          f"Redis {floor_read['redis']:.1f}; fake providers {floor_read['fake providers']:.1f} "
          f"(ours: {real.get('fake providers', 0.0):.1f})")
    print(f"the same, a {cpu_floor.PAUSE_S:g} s pause after every read: workers "
          f"{floor_paused['workers']:.1f} (in {floor_paused['workers_wake_ups']:.0f} wake-ups; "
          f"main threads {floor_paused['workers_main_thread']:.1f}), "
          f"Redis {floor_paused['redis']:.1f}")
    print(f"our processes per turn / the floor with the providers' streams: "
          f"{ours / floor_read['workers']:.2f}x; read with pauses: "
          f"{ours / floor_paused['workers']:.2f}x")


if __name__ == "__main__":
    main()
