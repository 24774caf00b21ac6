"""Missing keys, provider retries, the CLI, and ``voxqueue up`` with Flower behind auth."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, SPEECH, System, free_port, system_env

pytestmark = pytest.mark.integration
VOXQUEUE = [sys.executable, "-m", "voxqueue.cli"]


@pytest.fixture(scope="module")
def keyless(redis_server, tmp_path_factory):
    """A system whose workers are told to use the cloud providers but have no keys."""
    url = redis_server.url[:-1] + "5"
    env = system_env(url, None, VOXQUEUE_STT="openai", VOXQUEUE_LLM="openai",
                     VOXQUEUE_TTS="elevenlabs")
    system = System(env, tmp_path_factory.mktemp("keyless-logs"), beat=False)
    system.sup.start("worker-all", system.sup.worker_argv(
        ["stt", "agent", "tools", "tts"], name="all", concurrency=4))
    system.sup.wait_for_workers(["stt", "agent", "tools", "tts"])
    yield system
    system.stop()


def test_missing_llm_key_is_a_clear_error_naming_the_variable(keyless):
    result = keyless.client().ask("hello", session="nokey").wait(timeout=30)
    assert result.status == "error"
    assert result.error is not None and result.error["code"] == "missing-key"
    assert "OPENAI_API_KEY" in result.error["message"]


def test_missing_stt_key_is_a_clear_error(keyless):
    result = keyless.client().say(SPEECH / "command_time.wav").wait(timeout=30)
    assert result.error is not None and result.error["code"] == "missing-key"
    assert "OPENAI_API_KEY" in result.error["message"]


def test_cli_failed_turn_exits_non_zero_with_code_and_message(keyless):
    proc = subprocess.run([*VOXQUEUE, "ask", "hello", "--json", "--no-speak"],
                          env=keyless.env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["status"] == "error"
    assert "missing-key" in proc.stderr and "OPENAI_API_KEY" in proc.stderr


def test_cli_ask_json_prints_the_whole_turn(system, fake, tmp_path):
    fake.script_chat(
        {"match": "sum", "tool_calls": [{"name": "calculate",
                                         "arguments": {"expression": "12 * 13"}}]},
        {"after_tool": True, "content": "It is 156."})
    out = tmp_path / "reply.wav"
    proc = subprocess.run([*VOXQUEUE, "ask", "what is the sum", "--json", "--session", "cli",
                           "--audio-out", str(out)],
                          env=system.env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert set(data) >= {"turn_id", "session_id", "transcript", "reply", "tool_calls", "timings",
                         "audio_path", "status"}
    assert data["session_id"] == "cli" and data["status"] == "ok"
    assert data["reply"] == "It is 156."
    assert data["tool_calls"][0]["name"] == "calculate"
    assert data["tool_calls"][0]["result"] == "12 times 13 is 156."
    assert data["tool_calls"][0]["ms"] >= 0
    assert {"llm", "tools", "tts", "total"} <= set(data["timings"])
    assert list(data["timings"]) == ["llm", "tools", "tts", "first_audio", "total"]  # in order
    assert Path(data["audio_path"]) == out and out.stat().st_size > 1000


def test_cli_say_and_bad_input(system, fake, tmp_path):
    fake.script_transcripts("what is the weather")
    proc = subprocess.run([*VOXQUEUE, "say", str(SPEECH / "command_weather_paris.wav"),
                           "--json"], env=system.env, cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["transcript"] == "what is the weather"
    junk = tmp_path / "junk.wav"
    junk.write_bytes(b"this is not audio at all")
    bad = subprocess.run([*VOXQUEUE, "say", str(junk)], env=system.env, cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "audio-invalid" in bad.stderr


def test_429_retry_after_is_honoured(client, fake):
    fake.inject("chat", status=429, headers={"retry-after-ms": "400"})
    result = client.ask("hello again", session="retry", speak=False).wait(timeout=30)
    assert result.status == "ok", result.error
    chats = fake.requests_for("chat")
    assert [r["status"] for r in chats] == [429, 200]
    assert chats[1]["ts"] - chats[0]["ts"] >= 0.4


def test_a_burst_of_5xx_is_retried_with_backoff(client, fake):
    fake.inject("chat", status=503, times=2)
    fake.inject("tts", status=500)
    result = client.ask("hello burst", session="burst").wait(timeout=30)
    assert result.status == "ok", result.error
    assert [r["status"] for r in fake.requests_for("chat")] == [503, 503, 200]
    assert [r["status"] for r in fake.requests_for("tts")] == [500, 200]


def test_a_provider_that_stays_down_ends_the_turn_with_an_apology(client, fake):
    fake.inject("chat", status=500, times=50)
    turn = client.ask("anyone there", session="down")
    result = turn.wait(timeout=60)
    assert result.status == "error"
    assert result.error is not None and result.error["code"] == "llm-failed"
    assert len(fake.requests_for("chat")) == client.settings.providers.max_attempts
    assert result.reply and result.reply.startswith("Sorry")
    assert len(turn.audio()) > 0


def test_a_broken_worker_setup_ends_the_turn_at_once_with_a_clear_error(
        redis_server, fake_providers, tmp_path):
    """A bug or misconfiguration inside a stage ends the turn with an error, not a timeout."""
    env = system_env(redis_server.url[:-1] + "6", fake_providers,
                     VOXQUEUE_TOOL_MODULES="no_such_tool_module")
    system = System(env, tmp_path, beat=False)
    try:
        system.sup.start("worker-all", system.sup.worker_argv(
            ["stt", "agent", "tools", "tts"], name="broken", concurrency=4))
        system.sup.wait_for_workers(["stt", "agent", "tools", "tts"])
        result = system.client().ask("hello", speak=False, deadline_s=30).wait(timeout=40)
    finally:
        system.stop()
    assert result.status == "error"
    assert result.error is not None and result.error["code"] == "internal-error"
    assert "no_such_tool_module" in result.error["message"]


def test_demo_answers_the_sample_offline_on_an_embedded_redis(tmp_path):
    """The README's main command: no keys, no Redis answering: it still answers aloud."""
    env = system_env(f"redis://127.0.0.1:{free_port()}/0", None)
    reply = tmp_path / "reply.wav"
    done = subprocess.run([*VOXQUEUE, "demo", "--audio-out", str(reply)], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "started an embedded one" in done.stdout
    stt = "whisper" if importlib.util.find_spec("faster_whisper") else "pocketsphinx"
    assert f"{stt} (offline)" in done.stdout and "piper" in done.stdout
    assert "You said:" in done.stdout and "156" in done.stdout
    from voxqueue.audio import read_wav, rms

    pcm = read_wav(reply.read_bytes(), max_bytes=10**8, max_seconds=60)
    assert pcm.seconds > 1.0 and rms(pcm.data) > 200


def test_demo_without_a_microphone_says_so(tmp_path):
    done = subprocess.run([*VOXQUEUE, "demo", "--mic"], env=system_env("redis://127.0.0.1:1/0",
                                                                         None),
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    if done.returncode == 0:
        pytest.skip("this machine has a working microphone")
    assert done.returncode == 2
    assert "microphone" in done.stderr
