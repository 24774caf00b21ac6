"""``voxqueue satellite`` against the real ``wyoming-satellite`` (1.0.0, from PyPI, in a
virtualenv of its own since it pins an older ``wyoming``): its microphone is a recording, its
speaker a file. Wake word, command, reply audio played by the satellite, an announcement spoken
on it; then the satellite restarts and is served again. Both kinds of satellite: one that
streams all the time (the wake word is found on our side) and one with a wake word service of
its own (``--wake-uri``), which sends only the command."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import ROOT, SPEECH, free_port

pytestmark = pytest.mark.integration
SATELLITE = "wyoming-satellite==1.0.0"
SND_RATE = 22050  # the satellite's default --snd-command-rate


@pytest.fixture(scope="session")
def satellite_python() -> Path:
    """The satellite's own virtualenv, made once and kept in the user's cache."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    venv = cache / "voxqueue-tests" / SATELLITE.replace("==", "-")
    python = venv / "bin" / "python"
    if not (venv / ".installed").exists():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        done = subprocess.run([str(python), "-m", "pip", "install", "-q", SATELLITE],
                              capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            pytest.fail(f"could not install {SATELLITE} from the package index:\n"
                        f"{done.stderr[-2000:]}")
        (venv / ".installed").touch()
    return python


class Satellite:
    """One run of ``wyoming-satellite`` listening on ``port``, speaking into ``played``."""

    def __init__(self, python: Path, port: int, wav: Path, played: Path, log: Path,
                 extra: list[str]) -> None:
        mic = f"{shlex.quote(sys.executable)} {ROOT / 'testkit/fakes/mic_from_wav.py'} {wav}"
        snd = f"sh -c {shlex.quote(f'cat >> {played}')}"
        self.log = log.open("ab")
        self.proc = subprocess.Popen(
            [str(python), "-m", "wyoming_satellite", "--uri", f"tcp://127.0.0.1:{port}",
             "--name", "voxqueue test satellite", "--mic-command", mic, "--snd-command", snd,
             "--debug", *extra],
            stdout=self.log, stderr=subprocess.STDOUT)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


@pytest.fixture(params=["streams all the time", "wakes itself"])
def rig(request, system, satellite_python, tmp_path) -> Iterator[dict]:
    port = free_port()
    played = tmp_path / "played.raw"
    played.touch()
    log = tmp_path / "controller.log"
    sats: list[Satellite] = []
    extra: list[str] = []
    wake_service = None
    if request.param == "wakes itself":
        wake_port = free_port()
        wake_service = subprocess.Popen(
            [sys.executable, "-m", "testkit.fakes.wake_service", "--port", str(wake_port)],
            cwd=ROOT, stdout=subprocess.PIPE, text=True)
        assert wake_service.stdout is not None and wake_service.stdout.readline() == "READY\n"
        extra = ["--wake-uri", f"tcp://127.0.0.1:{wake_port}", "--wake-word-name", "hey_jarvis"]

    def satellite(wav: Path) -> Satellite:
        sat = Satellite(satellite_python, port, wav, played, tmp_path / "satellite.log", extra)
        sats.append(sat)
        return sat

    first = satellite(SPEECH / "hey_jarvis_time_tokyo.wav")
    with log.open("wb") as out:
        controller = subprocess.Popen(
            [sys.executable, "-m", "voxqueue.cli", "satellite", "--uri",
             f"tcp://127.0.0.1:{port}", "--device", "sat-kitchen"],
            env=system.env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        try:
            yield {"first": first, "satellite": satellite, "played": played, "log": log,
                   "satellite_log": tmp_path / "satellite.log", "mode": request.param}
        finally:
            controller.terminate()
            controller.wait(10)
            if wake_service is not None:
                wake_service.terminate()
                wake_service.wait(10)
            for sat in sats:
                if sat.proc.poll() is None:
                    sat.stop()


def seconds_played(played: Path) -> float:
    return played.stat().st_size / (SND_RATE * 2)


def wait_for_reply(rig: dict, more_than_s: float, timeout: float = 60) -> float:
    give_up = time.time() + timeout
    while time.time() < give_up:
        if seconds_played(rig["played"]) > more_than_s:
            time.sleep(1.0)  # the rest of the reply
            return seconds_played(rig["played"])
        time.sleep(0.2)
    raise AssertionError(f"no reply played by the satellite\n--- controller:\n"
                         f"{rig['log'].read_text()[-3000:]}\n--- satellite:\n"
                         f"{rig['satellite_log'].read_text()[-3000:]}")


def words(text: str) -> list[str]:
    return text.split()


def test_a_satellite_is_woken_asked_and_answered(rig, fake, client):
    """Both kinds: wake word, command, reply played. The one that streams all the time also
    hears an announcement, then restarts and is served again."""
    fake.script_transcripts("What time is it in Tokyo?", "What is the weather in Paris?")
    fake.script_chat({"match": "tokyo", "content": "It is nine in the evening in Tokyo."},
                     {"match": "paris", "content": "Paris is sunny today."})

    first = wait_for_reply(rig, 0.5)
    assert len(fake.requests_for("transcriptions")) == 1  # one command, heard once
    spoken = [r["json"]["text"] for r in fake.requests_for("tts")]
    # The reply's pieces are synthesized in parallel: their requests arrive in any order.
    assert sorted(" ".join(spoken).split()) == sorted(words("It is nine in the evening in Tokyo."))
    audio = np.frombuffer(rig["played"].read_bytes(), dtype="<i2")
    assert np.sqrt(np.mean(audio.astype(np.float64) ** 2)) > 100  # speech, not silence
    satellite_log = rig["satellite_log"].read_text()
    assert "Streaming audio" in satellite_log
    stage = "asr" if rig["mode"] == "wakes itself" else "wake"
    assert f"satellite pipeline from the {stage} stage to tts" in rig["log"].read_text()
    if rig["mode"] == "wakes itself":  # the satellite found the wake word and sent the rest
        assert "Waiting for wake word" in satellite_log

    if rig["mode"] == "wakes itself":
        return  # the rest is the same for both kinds of satellite

    # An announcement for the device (a timer going off) is spoken on the satellite.
    client.redis.xadd(client.keys.announcements("sat-kitchen"), {
        "e": '{"v": 1, "type": "announcement", "kind": "timer", "text": "Tea is ready."}'})
    first = wait_for_reply(rig, first + 0.3)
    assert [r["json"]["text"] for r in fake.requests_for("tts")][-1] == "Tea is ready."

    # The satellite restarts (a Raspberry Pi rebooting): the controller connects again.
    rig["first"].stop()
    rig["satellite"](SPEECH / "hey_jarvis_weather_paris.wav")
    wait_for_reply(rig, first + 0.5)
    assert len(fake.requests_for("transcriptions")) == 2
    latest = [r["json"]["text"] for r in fake.requests_for("tts")][len(spoken) + 1:]
    assert sorted(" ".join(latest).split()) == sorted(words("Paris is sunny today."))
    assert rig["log"].read_text().count("connected (") == 2
