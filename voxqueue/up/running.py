"""Which processes a ``voxqueue up`` runs now, and the memory of each (``voxqueue doctor``).

The supervisor writes its children (name and pid) to ``RUNNING_FILE`` in its data folder each
time one starts, and removes the file when it stops; ``doctor`` reads it, keeps the processes that
are still that supervisor's children (a pid reused since is not one of them), and reads their
memory from ``/proc`` (Linux).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ValidationError

#: The file in the data folder (``VOXQUEUE_DATA_DIR``) that lists the running processes.
RUNNING_FILE = "up-processes.json"

#: How the ``up`` process itself is named among them (beat and the exporter are its threads).
SUPERVISOR = "voxqueue up (supervisor, beat, exporter)"


class RunningProcess(BaseModel):
    name: str
    pid: int


class RunningUp(BaseModel):
    """What a running ``voxqueue up`` wrote: its own pid and its children's."""

    supervisor: int
    processes: list[RunningProcess]


def write_running(path: Path, supervisor: int, processes: Iterable[tuple[str, int]]) -> None:
    """Replace ``path`` with the list (written aside, then renamed: a reader never sees half)."""
    table = RunningUp(supervisor=supervisor,
                      processes=[RunningProcess(name=n, pid=p) for n, p in processes])
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    partial.write_text(table.model_dump_json())
    partial.replace(path)


def remove_running(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


@dataclass(frozen=True)
class Memory:
    """A process's memory in bytes: resident (RSS); its proportional share (PSS: each page
    shared with other processes divided among them, so PSS adds up across processes); its own
    pages (USS). PSS and USS are None where ``/proc/PID/smaps_rollup`` cannot be read."""

    rss: int
    pss: int | None = None
    uss: int | None = None


def memory_of(pid: int) -> Memory | None:
    """The memory of process ``pid`` (None when it is gone or cannot be read)."""
    try:
        fields = _kib_fields(Path(f"/proc/{pid}/smaps_rollup").read_text())
        return Memory(fields["Rss"], fields["Pss"],
                      fields.get("Private_Clean", 0) + fields.get("Private_Dirty", 0))
    except (OSError, KeyError):
        pass
    try:  # smaps_rollup needs the right to trace the process; status does not
        return Memory(_kib_fields(Path(f"/proc/{pid}/status").read_text())["VmRSS"])
    except (OSError, KeyError):
        return None


def _kib_fields(text: str) -> dict[str, int]:
    """``Name:  123 kB`` lines as bytes by name."""
    out = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        parts = rest.split()
        if len(parts) == 2 and parts[1] == "kB" and parts[0].isdigit():
            out[name] = int(parts[0]) * 1024
    return out


def parent_of(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


@dataclass(frozen=True)
class ProcessMemory:
    name: str
    pid: int
    memory: Memory


@dataclass(frozen=True)
class UpProcesses:
    """A running ``voxqueue up``'s processes with their memory, the supervisor first; or why
    there are none (``problem``)."""

    processes: list[ProcessMemory]
    problem: str = ""

    def total(self) -> Memory:
        """The set's memory: PSS adds up (RSS counts shared pages in each process)."""
        rss = sum(p.memory.rss for p in self.processes)
        pss = [p.memory.pss for p in self.processes]
        uss = [p.memory.uss for p in self.processes]
        return Memory(rss, None if None in pss else sum(p or 0 for p in pss),
                      None if None in uss else sum(u or 0 for u in uss))


def up_processes(path: Path) -> UpProcesses:
    """The processes the ``voxqueue up`` that wrote ``path`` runs now, with their memory."""
    try:
        table = RunningUp.model_validate_json(path.read_text())
    except FileNotFoundError:
        return UpProcesses([], f"no voxqueue up runs with this data folder ({path} is absent)")
    except (OSError, ValidationError) as exc:
        return UpProcesses([], f"{path} cannot be read: {exc}")
    supervisor = memory_of(table.supervisor)
    if supervisor is None:
        return UpProcesses([], f"the voxqueue up that wrote {path} (pid {table.supervisor}) "
                               "is gone")
    found = [ProcessMemory(SUPERVISOR, table.supervisor, supervisor)]
    for proc in table.processes:
        memory = memory_of(proc.pid)
        if memory is not None and parent_of(proc.pid) == table.supervisor:
            found.append(ProcessMemory(proc.name, proc.pid, memory))
    return UpProcesses(found)
