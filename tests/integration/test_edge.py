"""The edge device against real Redis and real workers: wake words, turns, replies, barge-in,
announcements and a Redis outage. Audio comes from the speech fixtures, as from a microphone."""

from __future__ import annotations

import io
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
import wave
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import redis
from rich.console import Console

from edge.device import Device
from edge.display import Display
from edge.player import Player, WavDirOutput
from edge.settings import EdgeSettings
from edge.sources import WavSource
from testkit.clock import wait_until
from testkit.waiting import tasks_of_turn
from tests.conftest import ROOT, SPEECH, RedisServer, System, system_env
from voxqueue.audio import rms
from voxqueue.keys import Keys
from voxqueue.settings import RedisSettings, Settings

pytestmark = pytest.mark.integration
VOXQUEUE = [sys.executable, "-m", "voxqueue.cli"]
LONG_REPLY = (
    "Once upon a time a small robot lived in a lighthouse by the sea. Every night it "
    "counted the ships that passed and wrote their names in a little book. One stormy "
    "evening a ship came that had no name at all, and the robot went down to the "
    "shore to ask it why."
)


def pcm_of(name: str) -> bytes:
    with wave.open(str(SPEECH / name)) as w:
        return w.readframes(w.getnframes())


def write_wav(path: Path, pcm: bytes) -> Path:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(pcm)
    return path


def silence(seconds: float) -> bytes:
    return bytes(int(seconds * 16000) * 2)


class Edge:
    """A device in this process, its terminal captured, replies written as WAV files."""

    def __init__(self, url: str, source: Any, out: Path, **edge: Any) -> None:
        self.out = out
        self.screen = io.StringIO()
        settings = Settings(redis=RedisSettings(url=url))
        config = EdgeSettings(
            _env_file=None,
            **{  # type: ignore[call-arg]
                "device": "edge-test",
                "wake_words": ["hey_jarvis", "okay_nabu"],
                **edge,
            },
        )
        display = Display(Console(file=self.screen, width=200, highlight=False))
        self.device = Device(
            config, settings, source, Player(WavDirOutput(out), realtime=source.live), display
        )

    def run(self) -> Edge:
        self.device.run()
        return self

    def files(self, kind: str) -> list[Path]:
        return sorted(self.out.glob(f"*-{kind}-*.wav"))


def wav_pcm(path: Path) -> bytes:
    with wave.open(str(path)) as w:
        return w.readframes(w.getnframes())


def events(client: Any, turn_id: str) -> list[Any]:
    return [e.event for e in client.store.history(turn_id)]


# -- the spoken stream ------------------------------------------------------------------------


def test_two_wake_words_give_exactly_two_turns_with_replies(system, client, fake, tmp_path):
    """``voxqueue edge --wav``: what the device runs, end to end, exiting once replies played."""
    fake.script_transcripts("What time is it in Tokyo?", "Set a timer for five minutes.")
    out = tmp_path / "replies"
    env = {**system.env, "VOXQUEUE_EDGE_DEVICE": "edge-two"}
    proc = subprocess.run(
        [
            *VOXQUEUE,
            "edge",
            "--wav",
            str(SPEECH / "edge_two_turns.wav"),
            "--audio-out",
            str(out),
            "-w",
            "hey_jarvis",
            "-w",
            "okay_nabu",
            "--session",
            "edge-two",
        ],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    screen = proc.stdout
    assert screen.count("wake word Hey Jarvis") == 1, screen
    assert screen.count("wake word Okay Nabu") == 1, screen
    you = [line.split("You:", 1)[1].strip() for line in screen.splitlines() if "You:" in line]
    assert you == ["What time is it in Tokyo?", "Set a timer for five minutes."], screen
    assert screen.count("Assistant:") == 2, screen
    assert screen.count("run-end ok") == 2, screen
    replies = sorted(out.glob("*-turn-*.wav"))
    assert len(replies) == 2, list(out.iterdir())
    assert all(rms(wav_pcm(p)) > 100 for p in replies)
    # Only what followed each wake word was sent (the claim check), and the utterances were cut
    # at the trailing silence, not at the end of the file.
    assert len(sent_seconds(fake)) == 2, screen
    assert all(1.5 < s < 5.0 for s in sent_seconds(fake)), sent_seconds(fake)


def sent_seconds(fake) -> list[float]:
    """Seconds of audio each command sent to speech to text: uploaded whole (16 kHz WAV) or
    streamed on a Realtime session (24 kHz PCM)."""
    return ([(r["file_size"] - 44) / 32000 for r in fake.requests_for("transcriptions")]
            + [r["audio_bytes"] / 48000 for r in fake.requests_for("realtime")])


@pytest.mark.parametrize(
    "name", ["speech_without_wake_word.wav", "noise_10s.wav", "silence_5s.wav"]
)
def test_audio_without_a_wake_word_sends_nothing(system, client, fake, tmp_path, name):
    edge = Edge(
        system.env["VOXQUEUE_REDIS_URL"],
        WavSource(SPEECH / name),
        tmp_path,
        wake_words=["okay_nabu", "hey_jarvis", "hey_mycroft", "alexa"],
    ).run()
    assert edge.device.turns == []
    assert "wake word" not in edge.screen.getvalue()
    assert sent_seconds(fake) == []
    assert list(tmp_path.glob("*.wav")) == []


def test_a_wake_word_without_a_command_times_out_and_sends_nothing(system, client, fake, tmp_path):
    # The wake phrase alone (cut off just after it), then silence.
    pcm = pcm_of("hey_jarvis_time_tokyo.wav")[: int(2.0 * 16000) * 2] + silence(6)
    edge = Edge(
        system.env["VOXQUEUE_REDIS_URL"],
        WavSource(write_wav(tmp_path / "wake_only.wav", pcm)),
        tmp_path / "out",
        no_speech_s=3.0,
    ).run()
    screen = edge.screen.getvalue()
    assert "wake word Hey Jarvis" in screen
    assert "no command heard" in screen
    assert edge.device.turns == []
    assert sent_seconds(fake) == []


def test_barge_in_stops_the_reply_cancels_the_turn_and_starts_a_new_one(
    system, client, fake, tmp_path
):
    """The wake word during a long reply: playback stops, the turn is cancelled in every stage,
    and what follows the wake word becomes the next turn. Read at the pace of speech."""
    fake.set_profile(tts_rtf=1.0)  # the reply is synthesized (and played) in real time
    fake.script_transcripts("Tell me a story.", "Set a timer for five minutes.")
    fake.script_chat({"match": "story", "content": LONG_REPLY})
    # The second wake word comes about 4 s into a reply that lasts over 15 s.
    stream = pcm_of("hey_jarvis_time_tokyo.wav") + silence(2.0) + pcm_of("okay_nabu_timer.wav")
    source = WavSource(write_wav(tmp_path / "barge_in.wav", stream), realtime=True)
    edge = Edge(system.env["VOXQUEUE_REDIS_URL"], source, tmp_path / "out", session="barge").run()
    first, second = edge.device.turns
    assert first.interrupted and first.status == "cancelled", first
    assert first.turn_id is not None
    history = events(client, first.turn_id)
    kinds = [e.type for e in history]
    assert "cancelled" in kinds
    assert [e.data["status"] for e in history if e.type == "run-end"] == ["cancelled"]
    # Every stage stopped: each sentence's synthesis checks the flag every 8 chunks, so only a
    # few chunks follow the cancel, and then the stream stops growing.
    after = kinds[kinds.index("cancelled") :].count("tts-chunk")
    assert after <= 8 * kinds.count("tts-start"), kinds
    turn_id = first.turn_id
    wait_until(lambda: not tasks_of_turn(client.redis, turn_id),
               "every task of the cancelled turn to end", timeout=30)
    assert len(events(client, first.turn_id)) == len(history), "a stage wrote after the cancel"
    assert first.played is not None and 0 < first.played.seconds < 12
    assert second.transcript == "Set a timer for five minutes." and second.status == "ok"
    assert "barge-in" in edge.screen.getvalue()
    # What was heard of the first reply is shorter than the whole story would have been.
    whole = 0.06 * len(LONG_REPLY)  # seconds: the fake speaks 60 ms of tone per character
    assert first.played.seconds < whole / 2


# -- announcements and speak() ----------------------------------------------------------------


def test_speak_goes_straight_to_tts_and_ends_the_turn(client, fake):
    turn = client.speak("Your tea is ready.", device="edge-test")
    result = turn.wait(timeout=30)
    assert result.status == "ok", result.error
    kinds = [e.event.type for e in turn._entries]
    assert "stt-start" not in kinds and "agent-step" not in kinds and "llm-start" not in kinds
    assert "tts-chunk" in kinds and result.reply == "Your tea is ready."
    assert rms(turn.audio()) > 100
    assert [r["json"]["text"] for r in fake.requests_for("tts")] == ["Your tea is ready."]


def test_announcements_are_spoken_between_turns(system, client, fake, tmp_path):
    """An entry with audio is played as it is; one with text only is synthesized by the
    server (Client.speak). Both arrive while the device is listening to silence."""
    url = system.env["VOXQUEUE_REDIS_URL"]
    source = WavSource(write_wav(tmp_path / "quiet.wav", silence(6)), realtime=True)
    edge = Edge(url, source, tmp_path / "out", device="edge-announce")
    thread = threading.Thread(target=edge.run)
    thread.start()
    r = redis.Redis.from_url(url)
    stream = Keys().announcements("edge-announce")
    beep = (np.sin(np.arange(8000) / 5) * 8000).astype("<i2").tobytes()
    # The listener reads what comes after the stream's newest entry when it started: write
    # once it has chosen where it reads from.
    wait_until(lambda: edge.device.announcements is not None
               and edge.device.announcements.last_id is not None, "the announcement listener")
    r.xadd(
        stream,
        {
            "e": '{"v":1,"type":"announcement","kind":"alert","text":"Disk full.",'
            f'"ts":{time.time()}}}',
            "pcm": beep,
        },
    )
    r.xadd(
        stream,
        {
            "e": '{"v":1,"type":"announcement","kind":"timer",'
            f'"text":"Your pasta timer is done.","ts":{time.time()}}}'
        },
    )
    thread.join(60)
    assert not thread.is_alive()
    announced = edge.device.responder.announced
    assert [a.kind for a, _ in announced] == ["alert", "timer"]
    played = announced[0][1]
    assert played is not None and played.path is not None and wav_pcm(played.path) == beep
    spoken = announced[1][1]
    assert spoken is not None and spoken.bytes > 0 and not spoken.stopped
    assert [r["json"]["text"] for r in fake.requests_for("tts")] == ["Your pasta timer is done."]
    assert edge.device.turns == []


# -- resilience ----------------------------------------------------------------------------------


class Lines:
    """A subprocess's output, line by line, waited on."""

    def __init__(self, stream: Any) -> None:
        self.lines: list[str] = []
        self._queue: queue.Queue[str] = queue.Queue()
        self._thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self._thread.start()

    def _pump(self, stream: Any) -> None:
        for line in stream:
            self.lines.append(line)
            self._queue.put(line)

    def wait_for(self, text: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self._queue.get(timeout=0.2)
            except queue.Empty:
                continue
            if text in line:
                return line
        raise AssertionError(f"no {text!r} within {timeout} s:\n{''.join(self.lines)}")

    def read_to_the_end(self, timeout: float) -> None:
        """Wait until the process's output has ended and every line is in."""
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the output did not end"

    @property
    def text(self) -> str:
        return "".join(self.lines)


@pytest.fixture
def private_system(fake_providers, tmp_path) -> Iterator[tuple[RedisServer, System]]:
    """A Redis of this test's own (to stop and restart) with workers of its own."""
    server = RedisServer()
    server.start()
    env = system_env(server.url, fake_providers)
    system = System(env, tmp_path / "logs", beat=False)
    queues = ["stt", "agent", "tools", "tts"]
    system.sup.start("worker-all", system.sup.worker_argv(queues, name="all", concurrency=4))
    system.sup.wait_for_workers(queues)
    yield server, system
    system.stop()
    server.stop()
    shutil.rmtree(server.dir, ignore_errors=True)


def test_the_edge_survives_a_redis_outage_and_recovers(private_system, fake, tmp_path):
    server, system = private_system
    fake.script_transcripts("Set a timer for five minutes.")
    out = tmp_path / "replies"
    env = {**system.env, "VOXQUEUE_EDGE_DEVICE": "edge-outage", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [
            *VOXQUEUE,
            "edge",
            "--stdin",
            "--audio-out",
            str(out),
            "-w",
            "okay_nabu",
            "-w",
            "hey_jarvis",
            "--session",
            "outage",
        ],
        env=env,
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=False,
    )
    assert proc.stdin is not None and proc.stdout is not None
    lines = Lines(io.TextIOWrapper(proc.stdout, encoding="utf-8", errors="replace"))
    try:
        lines.wait_for("device edge-outage", 30)
        proc.stdin.write(silence(1.0))
        proc.stdin.flush()
        server.stop()
        lines.wait_for("Cannot reach the server", 20)
        # Still listening while Redis is gone: a command now fails politely, not fatally.
        proc.stdin.write(pcm_of("hey_jarvis_time_tokyo.wav"))
        proc.stdin.flush()
        lines.wait_for("can't reach the server", 40)
        server.start()  # the same port: a restart
        lines.wait_for("redis reachable again", 30)
        proc.stdin.write(pcm_of("okay_nabu_timer.wav") + silence(1.0))
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0, lines.text
    finally:
        if proc.poll() is None:
            proc.kill()
    lines.read_to_the_end(10)
    screen = lines.text
    assert screen.count("Cannot reach the server") == 1, screen
    assert len(list(out.glob("*-earcon-unreachable.wav"))) == 1
    assert "You: Set a timer for five minutes." in screen, screen
    assert "run-end ok" in screen, screen
    assert len(list(out.glob("*-turn-*.wav"))) == 1


def test_no_worker_answering_ends_the_turn_with_an_apology(redis_server, tmp_path):
    """Redis answers but no worker serves its DB (8): the turn times out at its deadline, the
    user hears the notice once, and the device goes on listening."""
    url = redis_server.url.rsplit("/", 1)[0] + "/8"
    redis.Redis.from_url(url).flushdb()
    pcm = pcm_of("hey_jarvis_time_tokyo.wav") + silence(1.0)
    source = WavSource(write_wav(tmp_path / "ask.wav", pcm))
    edge = Edge(url, source, tmp_path / "out", deadline_s=1.0).run()
    [turn] = edge.device.turns
    assert turn.status == "timeout", turn
    screen = edge.screen.getvalue()
    assert "no answer in time" in screen and screen.count("workers are not answering") == 1
    assert [p.name.split("-", 1)[1] for p in sorted((tmp_path / "out").iterdir())] == [
        "earcon-unreachable.wav"
    ]


# -- offline providers ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def offline_system(redis_server, tmp_path_factory) -> Iterator[System]:
    """No API keys: pocketsphinx, local intents and Piper, on Redis DB 7."""
    url = redis_server.url.rsplit("/", 1)[0] + "/7"
    redis.Redis.from_url(url).flushdb()
    system = System(system_env(url, None), tmp_path_factory.mktemp("edge-offline"), beat=False)
    queues = ["stt", "agent", "tools", "tts"]
    system.sup.start("worker-all", system.sup.worker_argv(queues, name="all", concurrency=4))
    system.sup.wait_for_workers(queues)
    yield system
    system.stop()


@pytest.mark.skipif(
    not os.path.exists(ROOT / "workers/stt/providers/pocketsphinx_stt.py"),
    reason="no offline STT provider",
)
def test_two_turns_offline_are_transcribed_from_the_device_audio(offline_system, tmp_path):
    edge = Edge(
        offline_system.env["VOXQUEUE_REDIS_URL"],
        WavSource(SPEECH / "edge_two_turns.wav"),
        tmp_path,
        session="edge-offline",
    ).run()
    turns = edge.device.turns
    assert len(turns) == 2, edge.screen.getvalue()
    assert "tokyo" in (turns[0].transcript or "").lower(), turns[0]
    assert "timer" in (turns[1].transcript or "").lower(), turns[1]
    assert all(t.status == "ok" and t.reply for t in turns), turns
    assert all(t.played is not None and t.played.bytes > 0 for t in turns)


def test_edge_json_reports_each_command_with_its_timings(system, client, fake, tmp_path):
    """``voxqueue edge --wav F --realtime --json``: one JSON line per command on stdout, the
    screen on stderr. Streamed (the default), speech to text starts while the person speaks;
    ``--no-stream`` sends the whole command at its end, as before."""
    import json

    fake.script_transcripts({"text": "What time is it in Tokyo?", "repeat": True})
    wav = write_wav(tmp_path / "command.wav", pcm_of("hey_jarvis_time_tokyo.wav") + silence(1))
    reports = {}
    for flag in ("--stream", "--no-stream"):
        done = subprocess.run(
            [*VOXQUEUE, "edge", "--wav", str(wav), "--realtime", "--json", flag,
             "--audio-out", str(tmp_path / flag), "--no-announcements"],
            env={**system.env, "VOXQUEUE_EDGE_DEVICE": "json-edge"}, cwd=ROOT,
            capture_output=True, text=True, timeout=90)
        assert done.returncode == 0, done.stderr
        (line,) = done.stdout.splitlines()
        reports[flag] = json.loads(line)
        assert "wake word" in done.stderr
    for flag, report in reports.items():
        assert report["status"] == "ok" and report["transcript"] == "What time is it in Tokyo?"
        assert report["streamed"] == (1.0 if flag == "--stream" else 0.0)
        assert 0 < report["speech_end_to_first_audio_ms"] < 10_000, report
        if flag == "--stream":  # transcribed at the pause on the Realtime session: understood
            assert report["endpoint_wait_ms"] < 690, report
        else:
            assert report["endpoint_wait_ms"] >= 690, report  # the full trailing silence
        assert report["transcript_ms"] is not None
        history = events(client, report["turn_id"])
        (started,) = [e for e in history if e.type == "stt-start"]
        (ended,) = [e for e in history if e.type == "stt-end"]
        assert started.data["streamed"] is (flag == "--stream")
        if flag == "--stream":  # speech to text began while the person was still speaking
            assert started.ts < ended.data["speech_ended_at"] - 1.0
        assert not client.redis.exists(client.keys.speech(report["turn_id"]))
