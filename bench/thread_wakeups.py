"""Which threads of the TTS and agent workers wake, and what each kind spends, per turn.

    .venv/bin/python -m bench.thread_wakeups [--turns 60] [--concurrency 12]

The TTS and agent workers ``voxqueue up`` runs (default pools and processes) on a private
Redis, the fake providers in a process of their own, ``bench.latency``'s typed questions with a
three-piece spoken reply. Per thread, from ``/proc/PID/task/TID``: its CPU and its voluntary
context switches (it waited: a read, a sleep, the interpreter lock) and involuntary ones (the
kernel preempted it), summed by kind of thread (Celery's pool threads, the main thread that
runs Celery's consumer loop, the lease keeper…) and divided by the turns. Threads are named by
``py-spy dump`` (``pip install py-spy``) after the turns; without it, "main" and "other".
"""

from __future__ import annotations

import argparse
import re
import subprocess
import time
from collections import defaultdict
from pathlib import Path

from bench.harness import bench_system
from bench.latency import PROFILE, REPLY, run_turns
from bench.profiles import py_spy
from bench.sections import QUEUES, queue_of
from voxqueue.process_table import DEFAULT_PROCESSES


def thread_counters(pid: int) -> dict[int, tuple[int, int, int]]:
    """Each live thread of ``pid``: (CPU ns, voluntary switches, involuntary switches)."""
    out: dict[int, tuple[int, int, int]] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            cpu_ns = int((task / "schedstat").read_text().split()[0])
            status = (task / "status").read_text()
        except (OSError, ValueError, IndexError):
            continue  # the thread ended meanwhile
        counts = dict(re.findall(r"^(\w*voluntary_ctxt_switches):\s+(\d+)", status, re.M))
        out[int(task.name)] = (cpu_ns, int(counts.get("voluntary_ctxt_switches", 0)),
                               int(counts.get("nonvoluntary_ctxt_switches", 0)))
    return out


def thread_names(pid: int) -> dict[int, str]:
    """Python's name of each thread of ``pid``, by ``py-spy dump`` (empty without py-spy)."""
    exe = py_spy()
    if exe is None:
        return {}
    dump = subprocess.run([exe, "dump", "--pid", str(pid)], capture_output=True, text=True,
                          check=False).stdout
    return {int(tid, 0): name for tid, name in
            re.findall(r'^Thread (0x[0-9A-Fa-f]+|\d+) \(\w+\): "([^"]*)"', dump, re.M)}


def kind(name: str | None, is_main: bool) -> str:
    """A thread's kind: ``main``, ``pool`` (Celery's threads pool), or its name without a
    trailing number."""
    if is_main or name == "MainThread":
        return "main"
    if name is None:
        return "other"
    if name.startswith("ThreadPoolExecutor"):
        return "pool"
    return re.sub(r"[-_]?\d+$", "", name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=60)
    parser.add_argument("--concurrency", type=int, default=12)
    args = parser.parse_args()
    with bench_system(PROFILE, separate_fake=True, processes=DEFAULT_PROCESSES) as system:
        system.fake.script_chat({"repeat": True, "content": REPLY})
        run_turns(system, 6, 3, lambda i: system.client.ask("warm up", session=f"w{i}"))
        time.sleep(1)
        pids = {role: pid for role, pid in system.pids.items()
                if queue_of(role) in QUEUES}
        before = {role: thread_counters(pid) for role, pid in pids.items()}
        run_turns(system, args.turns, args.concurrency,
                  lambda i: system.client.ask("weather tomorrow", session=f"c{i}"))
        after = {role: thread_counters(pid) for role, pid in pids.items()}
        names = {role: thread_names(pid) for role, pid in pids.items()}
    rows: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])
    for role, pid in pids.items():
        for tid, (cpu_ns, vol, invol) in after[role].items():
            was = before[role].get(tid, (0, 0, 0))  # a thread started during the turns: all
            row = rows[(queue_of(role), kind(names[role].get(tid), tid == pid))]
            row[0] += (cpu_ns - was[0]) / 1e6 / args.turns
            row[1] += (vol - was[1]) / args.turns
            row[2] += (invol - was[2]) / args.turns
            row[3] += 1
    print(f"{args.turns} typed turns, {args.concurrency} at a time, a three-piece spoken reply")
    print("| queue | threads | how many | CPU ms per turn | waits per turn | preempted per turn "
          "| CPU µs per switch |")
    print("|---|---|---|---|---|---|---|")
    for (queue, what), (ms, vol, invol, n) in sorted(rows.items(), key=lambda kv: -kv[1][0]):
        if ms < 0.005:
            continue
        print(f"| {queue} | {what} | {n:.0f} | {ms:.2f} | {vol:.1f} | {invol:.1f} | "
              f"{1000 * ms / max(vol + invol, 1e-9):.0f} |")


if __name__ == "__main__":
    main()
