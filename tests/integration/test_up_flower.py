"""``voxqueue up`` as a user runs it (embedded Redis, every queue's workers, beat, Flower behind
auth), then what Flower shows: no housekeeping while idle, the turns' tasks on the first page
of its Tasks page in a real browser, a history sized for a day; Ctrl-C stops it all."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from testkit.browser import Browser, chromium
from tests.conftest import ROOT, free_port, system_env
from voxqueue.settings import QUEUES
from voxqueue.up.embedded_redis import embedded_redis_url
from voxqueue.up.process_table import FLOWER_MAX_TASKS, worker_names

pytestmark = pytest.mark.integration
VOXQUEUE = [sys.executable, "-m", "voxqueue.cli"]
AUTH = ("ops", "s3cret-pw")


@dataclass
class Up:
    proc: subprocess.Popen[str]
    env: dict[str, str]
    flower: str
    turns: list[str] = field(default_factory=list)


def _request(url: str, auth: tuple[str, str] | None) -> urllib.request.Request:
    request = urllib.request.Request(url)
    if auth:
        request.add_header("Authorization", _basic(auth))
    return request


def _basic(auth: tuple[str, str]) -> str:
    return "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()


def _get(url: str, auth: tuple[str, str] | None = None) -> int:
    try:
        with urllib.request.urlopen(_request(url, auth), timeout=2) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except (urllib.error.URLError, OSError):
        return 0


def _json(url: str) -> object:
    with urllib.request.urlopen(_request(url, AUTH), timeout=10) as answer:
        return json.loads(answer.read())


def _flower_workers(base: str) -> set[str]:
    """The worker names (before the ``@``) Flower knows, asking the workers afresh."""
    try:
        return {name.split("@")[0] for name in _json(f"{base}/api/workers?refresh=1")}  # type: ignore[attr-defined]
    except (urllib.error.URLError, OSError, ValueError):
        return set()


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Up]:
    flower_port = free_port()
    env = system_env(f"redis://127.0.0.1:{free_port()}/0", None,
                     VOXQUEUE_FLOWER_PORT=str(flower_port), VOXQUEUE_FLOWER_USER=AUTH[0],
                     VOXQUEUE_FLOWER_PASSWORD=AUTH[1])
    proc = subprocess.Popen([*VOXQUEUE, "up", "--processes", "tts=3,agent=2"], env=env,
                            cwd=tmp_path_factory.mktemp("up"), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    system = Up(proc, env, f"http://127.0.0.1:{flower_port}")
    try:
        yield system
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate(timeout=30)


def test_up_starts_every_queue_and_flower_behind_auth(up):
    base = up.flower
    deadline = time.time() + 60
    status = 0
    while time.time() < deadline:
        status = _get(f"{base}/api/workers", AUTH)
        if status == 200:
            break
        time.sleep(0.5)
    assert status == 200
    assert _get(f"{base}/api/workers") == 401
    assert _get(f"{base}/", ("ops", "wrong")) == 401
    # Every queue's worker processes: two for agent, three for tts, one for the others.
    counts = {"tts": 3, "agent": 2}
    expected = {name for q in QUEUES for name in worker_names(q, counts.get(q, 1))}
    seen: set[str] = set()
    while time.time() < deadline + 60 and not expected <= seen:
        seen = _flower_workers(base)
        time.sleep(1)
    assert {"agent-2", "tts-3"} <= expected <= seen, seen
    # Idle, nothing runs as a task: timers and overdue turns are the monitor workers' loop,
    # not a task every second that would fill Flower's task list.
    time.sleep(3)
    tasks = _json(f"{base}/api/tasks")
    assert tasks == {}, sorted({t.get("name") for t in tasks.values()})  # type: ignore[attr-defined]
    # Its history holds a day of turns (Flower's own default, 10,000, is a few hours').
    port = up.flower.rsplit(":", 1)[1]
    flower = subprocess.run(["pgrep", "-f", f"flower.*--port={port}"],
                            capture_output=True, text=True).stdout.split()
    assert flower, "no Flower process"
    argv = Path(f"/proc/{flower[0]}/cmdline").read_bytes().split(b"\0")
    assert f"--max_tasks={FLOWER_MAX_TASKS}".encode() in argv


def test_three_turns_are_the_tasks_flower_lists(up):
    for question in ("what is 12 times 13", "what is 7 plus 8", "what is 9 times 9"):
        # A client of the embedded Redis `up` started (it says where).
        env = {**up.env, "VOXQUEUE_REDIS_URL": embedded_redis_url()}
        done = subprocess.run([*VOXQUEUE, "ask", question, "--json"], env=env, cwd=ROOT,
                              capture_output=True, text=True, timeout=90)
        assert done.returncode == 0, done.stderr
        up.turns.append(json.loads(done.stdout)["turn_id"])
    deadline = time.time() + 20
    names: dict[str, set[str]] = {}
    while time.time() < deadline:
        tasks = _json(f"{up.flower}/api/tasks")
        names = {turn: {t["name"] for t in tasks.values()  # type: ignore[attr-defined]
                        if turn in (t.get("uuid") or "") + (t.get("args") or "")}
                 for turn in up.turns}
        if all("voxqueue.tts.speak" in found for found in names.values()):
            break
        time.sleep(0.5)
    for turn, found in names.items():  # each turn: its agent step, tool, next step and speech
        assert {"voxqueue.agent.step", "voxqueue.tools.run", "voxqueue.tts.speak"} <= found, \
            (turn, found)


@pytest.mark.skipif(chromium() is None,
                    reason="no Chromium here (apt install chromium): Flower's page not opened")
def test_flower_tasks_page_shows_the_turns_on_its_first_page(up):
    assert up.turns, "needs the turns of the test before"
    with Browser(chromium() or "") as browser:
        browser.open(f"{up.flower}/tasks", headers={"Authorization": _basic(AUTH)})
        rows = browser.wait_for(
            "(() => { const rows = [...document.querySelectorAll('#tasks-table tbody tr')]"
            ".map(r => r.innerText); return rows.length > 1 ? rows : null; })()")
        assert rows, "Flower's Tasks page showed no task"
        page = "\n".join(rows)
        for turn in up.turns:  # newest first: every turn is on the first page, by its id
            assert turn in page, (turn, page[:2000])
        assert "housekeeping" not in page and "fire_timers" not in page
        # One turn found by its id in the search box (as docs/operations.md tells).
        first = up.turns[0]
        browser.evaluate(f"$('#tasks-table').DataTable().search('{first}').draw()")
        found = browser.wait_for(
            "(() => { const rows = [...document.querySelectorAll('#tasks-table tbody tr')]"
            f".map(r => r.innerText); return rows.length >= 4 && rows.every(r => "
            f"r.includes('{first}')) ? rows : null; }})()")
    assert found and all(first in row for row in found), found


def test_ctrl_c_stops_everything(up):
    children = subprocess.run(["pgrep", "-P", str(up.proc.pid)], capture_output=True,
                              text=True).stdout.split()
    assert len(children) >= 8, children  # workers, beat, Flower, exporter (each its session)
    os.killpg(up.proc.pid, signal.SIGINT)
    output, _ = up.proc.communicate(timeout=60)
    assert up.proc.returncode == 0, output
    assert "embedded Redis" in output
    assert AUTH[1] not in output
    assert _get(f"{up.flower}/") == 0  # Flower stopped with it
    alive = [pid for pid in children if Path(f"/proc/{pid}").exists()]
    assert not alive, f"children outlived Ctrl-C: {alive}"
