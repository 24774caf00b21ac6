"""Operators' views of a turn: the trace waterfall, the doctor, structured logs."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import pytest

from tests.conftest import ROOT, free_port, system_env

pytestmark = pytest.mark.integration
VOXQUEUE = [sys.executable, "-m", "voxqueue.cli"]


def run_tool_turn(client, fake, session: str):
    fake.script_chat(
        {"match": "observe", "tool_calls": [{"name": "add_numbers", "arguments": {"a": 2,
                                                                                  "b": 3}}]},
        {"after_tool": True, "content": "The answer is five. That is all there is."})
    turn = client.ask("observe this", session=session, device="desk-1")
    assert turn.wait(timeout=30).status == "ok"
    return turn


def test_trace_prints_a_waterfall_and_writes_a_picture(system, client, fake, tmp_path):
    turn = run_tool_turn(client, fake, "trace")
    picture = tmp_path / "turn.svg"
    done = subprocess.run([*VOXQUEUE, "trace", turn.turn_id, "--out", str(picture)],
                          env=system.env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    for label in ("turn", "queue → agent", "llm step 1", "tool add_numbers", "llm step 2",
                  "tts sentence 0", "tts sentence 1"):
        assert label in done.stdout, label
    svg = ET.parse(picture).getroot()
    rects = [e for e in svg.iter() if e.tag.endswith("rect")]
    assert len(rects) >= 8
    html = tmp_path / "turn.html"
    subprocess.run([*VOXQUEUE, "trace", turn.turn_id, "--out", str(html)], env=system.env,
                   cwd=ROOT, capture_output=True, timeout=60, check=True)
    assert html.read_text().startswith("<!doctype html>")
    missing = subprocess.run([*VOXQUEUE, "trace", "no-such-turn-id"], env=system.env, cwd=ROOT,
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode == 1


def test_doctor_passes_on_a_running_system_and_fails_without_redis(system):
    done = subprocess.run([*VOXQUEUE, "doctor"], env=system.env, cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    for queue in ("stt", "agent", "tools", "tts", "monitor"):
        assert f"workers: {queue}" in done.stdout
    dead = system_env(f"redis://127.0.0.1:{free_port()}/0", None)
    broken = subprocess.run([*VOXQUEUE, "doctor"], env=dead, cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    assert broken.returncode == 1
    assert "start Redis" in broken.stdout


def test_every_log_line_of_a_turn_names_its_turn_session_device_and_queue(system, client,
                                                                         fake):
    turn = run_tool_turn(client, fake, "logs")

    def turn_lines() -> list[dict]:
        found = []
        for path in system.sup.log_dir.glob("worker-*.log"):
            for raw in path.read_text(errors="replace").splitlines():
                if raw.startswith("{"):
                    record = json.loads(raw)
                    if record.get("turn_id") == turn.turn_id:
                        found.append(record)
        return found

    # A task's "succeeded" line is written after it ended the turn: give the workers a moment.
    give_up = time.monotonic() + 10
    while True:
        lines = turn_lines()
        queues = {r["queue"] for r in lines}
        if {"agent", "tools", "tts"} <= queues or time.monotonic() > give_up:
            break
        time.sleep(0.1)
    assert {"agent", "tools", "tts"} <= queues
    for record in lines:
        assert record["session_id"] == "logs" and record["device"] == "desk-1", record
    assert all("sk-test" not in json.dumps(r) for r in lines)
