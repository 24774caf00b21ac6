"""Where a turn's CPU goes inside the TTS and agent workers, part by part of their tasks.

    .venv/bin/python -m bench.sections [--turns 60] [--concurrency 12]

The workers ``voxqueue up`` runs for the two queues (default pools and processes) on a private
Redis, the fake providers in a process of their own, typed questions with ``bench.latency``'s
three-piece spoken reply. Inside each TTS and agent process the functions of
``bench/section_hooks.py`` are timed on the thread that runs them (``time.thread_time``: the
thread's CPU, its waits not counted), from after a warm-up to the last turn's end. Prints, per
queue, each part's CPU per turn and calls per turn (rows include the rows indented under
them), the processes' whole CPU from ``/proc``, their main threads' (Celery's consumer loop:
takes, acks, task events), and what is left: Celery's work around each task on the pool's
threads, the lease keeper and the other threads.

Unlike py-spy's samples (``bench.cpu_per_turn --profile``), nothing is missed between samples,
and unlike a tracing profiler nothing but the listed calls is slowed: a part's figure is what
it costs in the run.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from bench.harness import bench_system, cpu_seconds, main_thread_cpu_seconds
from bench.latency import PROFILE, REPLY, run_turns
from bench.section_hooks import DUMP, GC_LABEL, RESET, SECTIONS
from tests.conftest import ROOT
from voxqueue.process_table import DEFAULT_PROCESSES

QUEUES = ("tts", "agent")


def queue_of(role: str) -> str:
    """The queue of a worker process's role (``tts-2`` is a ``tts`` process)."""
    return role.split("-")[0]


def by_queue(per_process: dict[str, dict[str, list[float]]]) -> dict[str, dict[str, list[float]]]:
    """Each queue's processes' totals (``tts``, ``tts-2``… together)."""
    out: dict[str, dict[str, list[float]]] = {}
    for role, totals in per_process.items():
        queue = queue_of(role)
        for label, (cpu_s, calls) in totals.items():
            entry = out.setdefault(queue, {}).setdefault(label, [0.0, 0.0])
            entry[0] += cpu_s
            entry[1] += calls
    return out


def report(queue: str, totals: dict[str, list[float]], process_s: float, main_s: float,
           turns: int) -> list[str]:
    """The table of one queue: its parts in ``SECTIONS``' order, then the process's whole."""
    ms = 1000 / turns
    lines = [f"\n{queue}: CPU ms per turn, {turns} turns",
             "| part | CPU ms per turn | calls per turn | share of the processes |",
             "|---|---|---|---|"]
    bodies = 0.0
    for section_queue, label, *_ in SECTIONS:
        if section_queue != queue or label not in totals:
            continue
        cpu_s, calls = totals[label]
        if not label.startswith(" ") and label != GC_LABEL:
            bodies += cpu_s
        shown = label.replace(" ", "\u00a0", len(label) - len(label.lstrip()))
        lines.append(f"| {shown} | {cpu_s * ms:.2f} | {calls / turns:.1f} | "
                     f"{cpu_s / process_s:.0%} |")
    rest = process_s - main_s - bodies
    lines += [f"| Celery's consumer loop (the main threads) | {main_s * ms:.2f} | | "
              f"{main_s / process_s:.0%} |",
              f"| the rest: Celery around each task, the lease keeper, other threads | "
              f"{rest * ms:.2f} | | {rest / process_s:.0%} |",
              f"| **the {queue} processes** | **{process_s * ms:.2f}** | | 100% |"]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=60)
    parser.add_argument("--concurrency", type=int, default=12)
    args = parser.parse_args()
    out = Path(tempfile.mkdtemp(prefix="vq-sections-"))
    hooks = {"PYTHONPATH": f"{ROOT / 'bench' / 'hooks'}{os.pathsep}{ROOT}",
             "VQBENCH_SECTIONS": str(out)}
    with bench_system(PROFILE, separate_fake=True, processes=DEFAULT_PROCESSES,
                      **hooks) as system:
        system.fake.script_chat({"repeat": True, "content": REPLY})
        run_turns(system, 6, 3, lambda i: system.client.ask("warm up", session=f"w{i}"))
        time.sleep(1)
        pids = {role: pid for role, pid in system.pids.items() if queue_of(role) in QUEUES}
        for pid in pids.values():
            os.kill(pid, RESET)
        before = {role: (cpu_seconds(pid), main_thread_cpu_seconds(pid))
                  for role, pid in pids.items()}
        run_turns(system, args.turns, args.concurrency,
                  lambda i: system.client.ask("weather tomorrow", session=f"c{i}"))
        used = {role: (cpu_seconds(pid) - before[role][0],
                       main_thread_cpu_seconds(pid) - before[role][1])
                for role, pid in pids.items()}
        for pid in pids.values():
            os.kill(pid, DUMP)
        deadline = time.monotonic() + 10
        while (missing := [p for p in pids.values() if not (out / f"{p}.json").exists()]):
            if time.monotonic() > deadline:
                raise SystemExit(f"no sections written by processes {missing}")
            time.sleep(0.1)
    totals = by_queue({role: json.loads((out / f"{pid}.json").read_text())
                       for role, pid in pids.items()})
    print(f"{args.turns} typed turns, {args.concurrency} at a time, a three-piece spoken reply")
    for queue in QUEUES:
        process_s = sum(u[0] for r, u in used.items() if queue_of(r) == queue)
        main_s = sum(u[1] for r, u in used.items() if queue_of(r) == queue)
        print("\n".join(report(queue, totals.get(queue, {}), process_s, main_s, args.turns)))


if __name__ == "__main__":
    main()
