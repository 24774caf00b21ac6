"""``voxqueue up`` at rest: the memory and idle CPU of each of its processes.

    .venv/bin/python -m bench.at_rest [--profile offline|cloud|both] [--idle-s 30]
        [--before REF]

Runs the real ``voxqueue up`` (its default processes, an embedded Redis, Flower, beat, the
exporter) and, once every worker answers and ``--settle-s`` more have passed, reads each process
of its tree from ``/proc``: resident memory (RSS), its proportional share (PSS: pages shared
between processes divided among them, so PSS adds up to what the set really holds) and what is its
own (USS: private pages), then CPU ms per second over ``--idle-s`` with nothing asked.

Profiles: ``offline``, no provider keys (the offline providers: Whisper or pocketsphinx, the
local agent, Piper); ``cloud``, the OpenAI and ElevenLabs keys set against the fake providers of
``testkit/fakes`` (in a process of their own). With ``--before REF`` the same is run in a
temporary git worktree of REF (this checkout's bench), and both are printed side by side.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from testkit import ROOT, free_port, system_env
from testkit.fakes import spawn
from voxqueue.up import running

MIB = 1024 * 1024

#: The target of issue #48: the whole set at rest.
TARGET_RSS_MB = 600.0
TARGET_IDLE_MS = 2.0


@dataclass
class Figures:
    """One process at rest."""

    rss_mb: float
    pss_mb: float
    uss_mb: float
    idle_ms_per_s: float = 0.0


def children_of(pid: int) -> list[int]:
    """Every descendant of ``pid`` (Linux ``/proc``), depth first."""
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            for child in map(int, (task / "children").read_text().split()):
                out += [child, *children_of(child)]
    return out


def role_of(pid: int) -> str:
    """What a process of ``up`` is, from its command line: a worker's name (``-n NAME@…``),
    ``beat``, ``flower``, ``exporter``, ``redis``; else its first words."""
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    if "-n" in argv:
        return "worker " + argv[argv.index("-n") + 1].split("@")[0]
    for word in ("beat", "flower", "exporter"):
        if word in argv:
            return word
    if "redis-server" in Path(argv[0]).name:
        return "redis"
    if "up" in argv:
        return "voxqueue up"
    return " ".join(argv[:3])


def memory_of(pid: int) -> Figures:
    """RSS, PSS and USS (private clean + dirty) of a process in MiB, as ``voxqueue doctor``
    reads them (``voxqueue.up.running.memory_of``: ``smaps_rollup``)."""
    memory = running.memory_of(pid)
    if memory is None or memory.pss is None or memory.uss is None:
        raise OSError(f"/proc/{pid}/smaps_rollup cannot be read")
    return Figures(memory.rss / MIB, memory.pss / MIB, memory.uss / MIB)


def thread_cpu_ns(pid: int) -> dict[int, int]:
    """Each thread's CPU time so far, in ns (``/proc/PID/task/TID/schedstat``: exact, where
    ``/proc/PID/stat`` counts whole clock ticks, 10 ms, too coarse for an idle second)."""
    out = {}
    for stat in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            out[int(stat.parent.name)] = int(stat.read_text().split()[0])
    return out


def idle_ms_per_s(before: dict[int, int], after: dict[int, int], seconds: float) -> float:
    """CPU ms per second between two readings of :func:`thread_cpu_ns` (a thread that ended
    meanwhile is not counted: an idle process here keeps its threads)."""
    return sum(ns - before.get(tid, 0) for tid, ns in after.items()) / 1e6 / seconds


def workers_answering(redis_url: str) -> int:
    """How many Celery workers answer a ping on ``redis_url``."""
    from voxqueue.celery_config import make_celery
    from voxqueue.settings import RedisSettings, Settings

    app = make_celery(Settings(redis=RedisSettings(url=redis_url)), "voxqueue-bench-at-rest")
    try:
        return len(app.control.inspect(timeout=1.0).ping() or {})
    finally:
        app.close()


@contextlib.contextmanager
def fake_providers() -> Iterator[object]:
    proc, fake = spawn(cwd=str(ROOT))
    try:
        yield fake
    finally:
        proc.terminate()
        proc.wait(10)


def measure(tree: Path, cloud: bool, idle_s: float, settle_s: float,
            log: Path) -> dict[str, Figures]:
    """``voxqueue up`` of ``tree`` at rest: its processes' figures by role."""
    with fake_providers() if cloud else contextlib.nullcontext() as fake:
        redis_port = free_port()
        url = f"redis://127.0.0.1:{redis_port}/0"
        env = system_env(url, fake, PYTHONPATH=str(tree),
                         VOXQUEUE_FLOWER_PORT=str(free_port()),
                         VOXQUEUE_METRICS_PORT=str(free_port()),
                         VOXQUEUE_FLOWER_PASSWORD="bench-at-rest-pw")
        for name in ("VOXQUEUE_TOOL_MODULES", "VOXQUEUE_LOG_LEVEL", "VOXQUEUE_PROVIDER_BACKOFF_S",
                     "VOXQUEUE_PREFER_LOCAL"):  # the defaults a user gets
            env.pop(name, None)
        with log.open("ab") as out:
            up = subprocess.Popen([sys.executable, "-m", "voxqueue.cli", "up", "--redis-port",
                                   str(redis_port)], cwd=tree, env=env, stdout=out,
                                  stderr=subprocess.STDOUT, start_new_session=True)
        try:
            give_up = time.monotonic() + 180
            while True:
                if up.poll() is not None or time.monotonic() > give_up:
                    raise RuntimeError(f"voxqueue up did not start (see {log})")
                pids = children_of(up.pid)
                workers = sum(role_of(p).startswith("worker") for p in pids)
                if workers and workers_answering(url) >= workers:
                    break
                time.sleep(1)
            time.sleep(settle_s)  # start-up is not rest
            pids = [up.pid, *children_of(up.pid)]
            roles = {pid: role_of(pid) for pid in pids}
            before = {pid: thread_cpu_ns(pid) for pid in pids}
            time.sleep(idle_s)
            figures: dict[str, Figures] = {}
            for pid in pids:
                fig = memory_of(pid)
                fig.idle_ms_per_s = idle_ms_per_s(before[pid], thread_cpu_ns(pid), idle_s)
                figures[unique(roles[pid], figures)] = fig
            return figures
        finally:
            os.killpg(up.pid, signal.SIGINT)
            try:
                up.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(up.pid, signal.SIGKILL)
                up.wait(10)


def unique(role: str, taken: dict[str, Figures]) -> str:
    n, name = 1, role
    while name in taken:
        n += 1
        name = f"{role} ({n})"
    return name


@contextlib.contextmanager
def tree_of(ref: str) -> Iterator[Path]:
    """A temporary git worktree of ``ref`` (with this checkout's bench and testkit)."""
    work = Path(tempfile.mkdtemp(prefix="vq-at-rest-"))
    tree = work / "tree"
    subprocess.run(["git", "worktree", "add", "--detach", str(tree), ref], cwd=ROOT, check=True,
                   capture_output=True)
    try:
        for part in ("bench", "testkit"):
            shutil.rmtree(tree / part, ignore_errors=True)
            shutil.copytree(ROOT / part, tree / part)
        yield tree
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT,
                       capture_output=True)
        shutil.rmtree(work, ignore_errors=True)


def totals(figures: dict[str, Figures]) -> Figures:
    return Figures(*(sum(getattr(f, k) for f in figures.values())
                     for k in ("rss_mb", "pss_mb", "uss_mb", "idle_ms_per_s")))


def table(name: str, sides: dict[str, dict[str, Figures]]) -> None:
    """One profile's table: a row per process, a column group per side."""
    labels = list(sides)
    print(f"\n{name}:")
    head = " | ".join(f"RSS MB, {s} | PSS MB, {s} | USS MB, {s} | idle CPU ms/s, {s}"
                      for s in labels)
    print(f"| process | {head} |")
    print("|---|" + "---|" * 4 * len(labels))
    roles = sorted({r for f in sides.values() for r in f}, key=_order)
    blank = " | ".join(["–"] * 4)
    for role in roles:
        cells = [_cells(sides[s][role]) if role in sides[s] else blank for s in labels]
        print(f"| {role} | {' | '.join(cells)} |")
    cells = [_cells(totals(sides[s]), bold=True) for s in labels]
    counts = ", ".join(f"{len(sides[s])} processes {s}" for s in labels)
    print(f"| **all ({counts})** | {' | '.join(cells)} |")


def _order(role: str) -> tuple[int, str]:
    digits = re.sub(r"\d+", lambda m: m.group().zfill(3), role)
    return (0 if role == "voxqueue up" else 1 if role.startswith("worker") else 2, digits)


def _cells(f: Figures, bold: bool = False) -> str:
    b = "**" if bold else ""
    return " | ".join(f"{b}{v:.{p}f}{b}" for v, p in ((f.rss_mb, 0), (f.pss_mb, 0),
                                                      (f.uss_mb, 0), (f.idle_ms_per_s, 2)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", choices=("offline", "cloud", "both"), default="both")
    parser.add_argument("--idle-s", type=float, default=30.0, help="the idle window per run")
    parser.add_argument("--settle-s", type=float, default=15.0,
                        help="seconds after every worker answers before measuring")
    parser.add_argument("--before", default=None, help="a commit to compare with")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()
    profiles = ["offline", "cloud"] if args.profile == "both" else [args.profile]
    log = Path(tempfile.mkdtemp(prefix="vq-at-rest-log-")) / "up.log"
    found: dict[str, dict[str, dict[str, Figures]]] = {p: {} for p in profiles}
    with tree_of(args.before) if args.before else contextlib.nullcontext(None) as before:
        for profile in profiles:
            if before is not None:
                found[profile]["before"] = measure(before, profile == "cloud", args.idle_s,
                                                   args.settle_s, log)
            found[profile]["now" if before is None else "after"] = measure(
                ROOT, profile == "cloud", args.idle_s, args.settle_s, log)
    print(f"voxqueue up at rest: memory after {args.settle_s:g} s settled, idle CPU over "
          f"{args.idle_s:g} s" + (f"; before: {args.before}" if args.before else ""))
    for profile in profiles:
        table(profile, found[profile])
    if args.json:
        args.json.write_text(json.dumps({p: {s: {r: asdict(f) for r, f in figs.items()}
                                             for s, figs in sides.items()}
                                         for p, sides in found.items()}))


if __name__ == "__main__":
    main()
