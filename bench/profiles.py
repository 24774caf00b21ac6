"""Sampling profiles of running processes with py-spy (``pip install py-spy``), kept out of the
repository: collapsed stacks per process, and a summary of where each spent its samples.

Only the thread holding the interpreter lock is sampled (``--gil``): py-spy's own idle test
counts a thread in ``time.sleep`` or in a blocking ``recv`` as busy, so without it the readers'
pauses and waits filled the profiles; with it a sample is Python running (the C code that
releases the lock, a socket's system calls, is not in it)."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path


def py_spy() -> str | None:
    """The py-spy beside this interpreter, else on the PATH (None: not installed)."""
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.exists() else shutil.which("py-spy")


class Profiles:
    """``py-spy record`` on each process while a block runs (``start``/``stop``)."""

    def __init__(self, out_dir: Path, pids: dict[str, int], rate: int = 250) -> None:
        self.exe = py_spy()
        if self.exe is None:
            raise SystemExit("--profile needs py-spy (pip install py-spy)")
        self.out_dir, self.pids, self.rate = out_dir, pids, rate
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self) -> None:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        for role, pid in self.pids.items():
            self.procs.append(subprocess.Popen(
                [self.exe, "record", "--pid", str(pid), "--rate", str(self.rate), "--gil",
                 "--format", "raw", "--output", str(self.out_dir / f"{role}.txt")],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

    def stop(self) -> None:
        for proc in self.procs:
            proc.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
        for proc in self.procs:
            proc.wait(60)

    def summary(self, top: int = 10) -> str:
        """Per process: the functions where samples ended (own time), as shares."""
        lines = []
        for role in self.pids:
            path = self.out_dir / f"{role}.txt"
            if not path.exists():
                continue
            own: Counter[str] = Counter()
            total = 0
            for line in path.read_text().splitlines():
                stack, _, count = line.rpartition(" ")
                if not stack or not count.isdigit():
                    continue
                leaf = stack.rsplit(";", 1)[-1]
                if "(threading.py)" in leaf and "wait" in leaf:
                    continue  # a thread waiting: not work
                own[leaf] += int(count)
                total += int(count)
            lines.append(f"\n{role}: {total} samples at {self.rate}/s, holding the interpreter "
                         "lock")
            for leaf, n in own.most_common(top):
                lines.append(f"  {n / max(total, 1):6.1%}  {leaf[:110]}")
        return "\n".join(lines)
