"""The reliability table: run ``tests/reliability`` and print one row per case tried.

    .venv/bin/python -m tests.reliability.table               # the default run (a few minutes)
    .venv/bin/python -m tests.reliability.table --soak        # with the soak variants
    .venv/bin/python -m tests.reliability.table -- -k load    # extra pytest arguments
    .venv/bin/python -m tests.reliability.table --rows FILE   # a table from rows collected before

Each reliability test appends rows ``{"case", "turns", "lost", "duplicates", "notes", "outcome"}``
to the JSON-lines file named by ``VOXQUEUE_RELIABILITY_REPORT``; this script points that at a
temporary file, runs pytest, and prints the rows as a Markdown table (exit status: pytest's).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from tests.reliability.ledger import REPORT_ENV

ROOT = Path(__file__).resolve().parents[2]
COLUMNS = ("Fault or attack", "Turns", "Lost", "Duplicates", "Result", "Notes")


def run_suite(report: Path, pytest_args: list[str]) -> int:
    """Run the reliability tests with their rows going to ``report``; pytest's exit code."""
    env = {**os.environ, REPORT_ENV: str(report)}
    argv = [
        sys.executable,
        "-m",
        "pytest",
        "tests/reliability",
        "-q",
        "-p",
        "no:cacheprovider",
        *pytest_args,
    ]
    return subprocess.run(argv, cwd=ROOT, env=env, check=False).returncode


def read_rows(report: Path) -> list[dict[str, Any]]:
    if not report.exists():
        return []
    lines = report.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _cell(value: object) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def markdown(rows: list[dict[str, Any]]) -> str:
    """The rows as a Markdown table, with a total line."""
    out = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for row in rows:
        out.append(
            "| "
            + " | ".join(
                _cell(v)
                for v in (
                    row["case"],
                    row["turns"],
                    row["lost"],
                    row["duplicates"],
                    row.get("outcome", ""),
                    row.get("notes", ""),
                )
            )
            + " |"
        )
    total = {k: sum(int(r[k]) for r in rows) for k in ("turns", "lost", "duplicates")}
    passed = sum(1 for r in rows if r.get("outcome") in ("passed", "xfailed"))
    out.append(
        f"| **total: {len(rows)} cases** | **{total['turns']}** | **{total['lost']}** | "
        f"**{total['duplicates']}** | {passed}/{len(rows)} as expected | |"
    )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--soak", action="store_true", help="include the soak variants")
    parser.add_argument("--rows", type=Path, help="print the table of an existing rows file")
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = parser.parse_args(argv)
    if args.rows is not None:
        print(markdown(read_rows(args.rows)))
        return 0
    with tempfile.TemporaryDirectory(prefix="vq-reliability-") as folder:
        report = Path(folder) / "reliability.jsonl"
        code = run_suite(report, [*(["--soak"] if args.soak else []), *args.pytest_args])
        rows = read_rows(report)
    print()
    print(markdown(rows))
    return code


if __name__ == "__main__":
    sys.exit(main())
