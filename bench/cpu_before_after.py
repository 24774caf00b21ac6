"""CPU per turn and idle CPU of an earlier commit and of this checkout, side by side.

    .venv/bin/python -m bench.cpu_before_after --before REF [--rounds 2] [--turns 60]
        [--concurrency 12] [--idle-s 20] [--after-env VOXQUEUE_X=value ...]

Checks REF out in a temporary git worktree and runs ``bench.cpu_per_turn`` (this checkout's
``bench`` and ``testkit``, so both sides are measured the same way) in it and here, alternating
which goes first each round, on this checkout's environment. Prints the medians by process,
before and after, and each side's multiple of the floor it measured in the same run.
``--after-env`` runs the "after" side with a setting (``--before HEAD`` then compares a setting
with the default).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.cpu_per_turn import setting

ROOT = Path(__file__).resolve().parents[1]


def run_side(tree: Path, args: argparse.Namespace, out: Path,
             env: list[str]) -> dict[str, Any]:
    subprocess.run([sys.executable, "-m", "bench.cpu_per_turn", "--turns", str(args.turns),
                    "--concurrency", str(args.concurrency), "--idle-s", str(args.idle_s),
                    "--json", str(out),
                    *(f"--env={pair}" for pair in env)], cwd=tree,
                   check=True, stdout=subprocess.DEVNULL)
    return dict(json.loads(out.read_text()))


def median_of(runs: list[dict[str, Any]], part: str, key: str) -> float:
    return statistics.median(r[part].get(key, 0.0) for r in runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="the commit to compare with")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--turns", type=int, default=60)
    parser.add_argument("--concurrency", type=int, default=12, help="turns at a time")
    parser.add_argument("--idle-s", type=float, default=20.0, help="the idle window per run")
    parser.add_argument("--after-env", action="append", default=[], type=setting,
                        metavar="VOXQUEUE_X=value",
                        help="a setting for the after side's processes (repeatable)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="vq-before-"))
    before_tree = work / "tree"
    subprocess.run(["git", "worktree", "add", "--detach", str(before_tree), args.before],
                   cwd=ROOT, check=True, capture_output=True)
    try:
        for part in ("bench", "testkit"):  # the same measurement, and the same fakes
            shutil.rmtree(before_tree / part, ignore_errors=True)
            shutil.copytree(ROOT / part, before_tree / part)
        sides: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
        for i in range(args.rounds):
            order = [("before", before_tree), ("after", ROOT)]
            for name, tree in order if i % 2 == 0 else order[::-1]:
                out = work / f"{name}-{i}.json"
                env = args.after_env if name == "after" else []
                sides[name].append(run_side(tree, args, out, env))
                print(f"round {i + 1}: {name} done", file=sys.stderr)
        report(sides, args)
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(before_tree)], cwd=ROOT,
                       capture_output=True)
        shutil.rmtree(work, ignore_errors=True)


def report(sides: dict[str, list[dict[str, Any]]], args: argparse.Namespace) -> None:
    ours = sides["after"][0]["ours"]
    roles = sorted({k for runs in sides.values() for r in runs for k in r["per_turn"]},
                   key=lambda k: -median_of(sides["before"], "per_turn", k))
    print(f"{args.rounds} rounds of {args.turns} typed turns, {args.concurrency} at a time, and "
          f"{args.idle_s:g} s idle per side "
          f"(medians); before: "
          f"{args.before}" + (f"; after with {' '.join(args.after_env)}"
                              if args.after_env else ""))
    print("| process | idle ms/s, before | after | CPU ms per turn, before | after | "
          "of it, main thread, before | after | wake-ups per turn, before | after |")
    print("|---|---|---|---|---|---|---|---|---|")
    for role in roles:
        cells = [median_of(sides[s], part, role)
                 for part in ("idle", "per_turn", "main_thread", "switches")
                 for s in ("before", "after")]
        print(f"| {role} | {cells[0]:.1f} | {cells[1]:.1f} | {cells[2]:.1f} | {cells[3]:.1f} | "
              f"{cells[4]:.1f} | {cells[5]:.1f} | {cells[6]:.0f} | {cells[7]:.0f} |")
    totals = {}
    for side, runs in sides.items():
        per_turn = [sum(v for k, v in r["per_turn"].items() if k in ours) for r in runs]
        idle = [sum(v for k, v in r["idle"].items() if k in ours) for r in runs]
        multiple = [t / r["floor"]["workers"] for t, r in zip(per_turn, runs, strict=True)]
        totals[side] = (statistics.median(idle), statistics.median(per_turn),
                        statistics.median(multiple),
                        statistics.median(r["floor"]["workers"] for r in runs))
    b, a = totals["before"], totals["after"]
    print(f"| **our processes** | **{b[0]:.1f}** | **{a[0]:.1f}** | **{b[1]:.1f}** | "
          f"**{a[1]:.1f}** |")
    print(f"\nthe floor's workers, CPU ms per turn: before's runs {b[3]:.1f}, after's {a[3]:.1f}; "
          f"ours as a multiple of the floor of the same run: {b[2]:.1f}x before, {a[2]:.1f}x "
          f"after; per turn after / before: {a[1] / b[1]:.2f}, idle: {a[0] / b[0]:.2f}")


if __name__ == "__main__":
    main()
