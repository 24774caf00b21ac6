"""``voxqueue up`` supervises: a worker that is killed is started again while the others keep
serving, and when ``up`` itself is killed no process of its tree outlives it (prefork pool
processes included)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ROOT, RedisServer, free_port, system_env
from voxqueue.client.direct import Client
from voxqueue.settings import QUEUES, RedisSettings, Settings
from voxqueue.up.supervisor import Supervisor

pytestmark = pytest.mark.integration
VOXQUEUE = [sys.executable, "-m", "voxqueue.cli"]


# -- the process tree, from /proc ---------------------------------------------------------
def _stat(pid: int) -> tuple[str, int, int] | None:
    """State, parent pid and start time of a process; None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = text[text.rindex(")") + 2:].split()
    return fields[0], int(fields[1]), int(fields[19])


def descendants(root: int) -> dict[int, int]:
    """Every process below ``root``: pid → start time (to tell a reused pid apart)."""
    parents: dict[int, list[tuple[int, int]]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (stat := _stat(int(entry.name))) is not None:
            parents.setdefault(stat[1], []).append((int(entry.name), stat[2]))
    found: dict[int, int] = {}
    todo = [root]
    while todo:
        for pid, started in parents.get(todo.pop(), []):
            found[pid] = started
            todo.append(pid)
    return found


def alive(pid: int, started: int) -> bool:
    stat = _stat(pid)
    return stat is not None and stat[0] != "Z" and stat[2] == started


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except (FileNotFoundError, ProcessLookupError):
        return ""


def wait_for(predicate: Callable[[], object], timeout: float, what: str) -> object:
    give_up = time.monotonic() + timeout
    while time.monotonic() < give_up:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def assert_all_gone(tree: dict[int, int], timeout: float = 5.0) -> None:
    def survivors() -> list[str]:
        return [f"{pid} {cmdline(pid)}" for pid, t in tree.items() if alive(pid, t)]

    give_up = time.monotonic() + timeout
    while survivors() and time.monotonic() < give_up:
        time.sleep(0.1)
    left = survivors()
    for line in left:
        os.kill(int(line.split()[0]), signal.SIGKILL)
    assert left == [], "outlived their killed parent"


# -- voxqueue up against a private Redis -------------------------------------------------
@dataclass
class Up:
    proc: subprocess.Popen[bytes]
    log: Path
    env: dict[str, str]
    settings: Settings

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def children(self, marker: str = "") -> list[int]:
        """``up``'s children whose command line holds ``marker``."""
        return [pid for pid in descendants(self.proc.pid)
                if (_stat(pid) or ("", 0, 0))[1] == self.proc.pid and marker in cmdline(pid)]


@pytest.fixture(scope="module")
def up(fake_providers: object, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Up]:
    server = RedisServer()
    server.start()
    work = tmp_path_factory.mktemp("up")
    env = system_env(server.url, fake_providers, VOXQUEUE_METRICS_PORT=str(free_port()))
    log = work / "up.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([*VOXQUEUE, "up", "--no-flower", "--processes", "agent=1,tts=1"],
                                env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    settings = Settings(redis=RedisSettings(url=server.url))
    running = Up(proc, log, env, settings)
    try:
        Supervisor(settings).wait_for_workers(QUEUES, timeout=60)
        yield running
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.wait(60)
        server.stop()


def test_a_killed_worker_is_started_again_and_the_others_keep_serving(up, fake):
    others = up.children()
    (tools,) = up.children("-n tools@")
    others.remove(tools)
    os.kill(tools, signal.SIGKILL)
    wait_for(lambda: [p for p in up.children("-n tools@") if p != tools], 15, "a new tools worker")
    Supervisor(up.settings).wait_for_workers(["tools"], timeout=30, names=["tools"])
    output = up.output()
    assert f"worker-tools (pid {tools}) exited with signal SIGKILL" in output, output
    assert "restart #1 in 1 s" in output and "worker-tools started again" in output, output
    assert up.proc.poll() is None
    assert all(_stat(pid) is not None for pid in others), "another process was stopped"
    fake.script_chat(
        {"match": "add", "tool_calls": [{"name": "add_numbers", "arguments": {"a": 12, "b": 13}}]},
        {"after_tool": True, "content": "That is 25."},
    )
    with Client(up.settings) as client:
        result = client.ask("add twelve and thirteen", session="up-restart",
                            speak=False).wait(timeout=30)
    assert result.status == "ok", result.error
    assert [c.result for c in result.tool_calls] == ["25"]  # run by the new tools worker


def test_a_turn_whose_tools_worker_is_killed_mid_tool_still_ends_ok(up, fake):
    """The issue's scenario on the deployment we ship: four 1-second tools in flight, the one
    tools worker SIGKILLed; `up` starts it again and the calls run again on it (their lease
    ran out), and the turn ends ok, well before its deadline."""
    fake.script_chat(
        {"match": "four naps", "tool_calls": [
            {"name": "sleep_one", "arguments": {"label": str(i)}} for i in range(4)]},
        {"after_tool": True, "content": "All four naps are done."},
    )
    with Client(up.settings) as client:
        turn = client.ask("take four naps", session="up-kill-mid-tool", speak=False)
        store = client.store
        wait_for(lambda: any(e.event.type == "tool-start" for e in store.history(turn.turn_id)),
                 15, "the tools to start")
        (tools,) = up.children("-n tools@")
        os.kill(tools, signal.SIGKILL)
        killed = time.time()
        result = turn.wait(timeout=60)
    assert result.status == "ok", result.error
    assert sorted(c.result for c in result.tool_calls) == [f"slept:{i}" for i in range(4)]
    took = time.time() - killed
    assert took < turn.spec.deadline - killed, "ended before its deadline"
    print(f"\nup: tools worker killed mid-tool -> turn ended ok {took:.1f} s later")


def test_nothing_outlives_a_killed_up(up):
    tree = descendants(up.proc.pid)
    names = " ".join(cmdline(pid) for pid in tree)
    assert "-n tools@" in names and "-n stt@" in names, names  # (beat, exporter: up's threads)
    os.kill(up.proc.pid, signal.SIGKILL)
    up.proc.wait(10)
    assert_all_gone(tree)


PARENT = """
import sys, time
from voxqueue.settings import Settings, ignore_dotenv
from voxqueue.up.supervisor import Supervisor
ignore_dotenv()
sup = Supervisor(Settings(), log_dir=__import__("pathlib").Path(sys.argv[1]))
sup.start_workers(pools={"tools": ("prefork", 2), "stt": ("threads", 2)}, queues=["tools", "stt"])
sup.wait_for_workers(["tools", "stt"], timeout=60)
print("ready", flush=True)
sup.watch()
"""


def test_prefork_pool_processes_die_with_a_killed_supervisor(redis_server, tmp_path):
    env = system_env(redis_server.url[:-1] + "7", None)
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(tmp_path)], env=env, cwd=ROOT,
                              stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert parent.stdout is not None and parent.stdout.readline().strip() == "ready"
        tree = descendants(parent.pid)
        lines = [cmdline(pid) for pid in tree]
        prefork = [line for line in lines if "-P prefork" in line]
        assert len(prefork) == 3, json.dumps(lines, indent=1)  # the worker and its 2 pool processes
    finally:
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(10)
    assert_all_gone(tree)
