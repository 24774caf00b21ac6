"""The edge's other parts: settings, sources, player, earcons, announcements, link, display,
and a device whose server is gone."""

from __future__ import annotations

import io
import os
import threading
import time
import wave
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError
from rich.console import Console

from edge.announcements import parse
from edge.device import Device
from edge.display import Display, describe
from edge.earcons import earcon
from edge.frames import FRAME_BYTES, frames_of
from edge.link import Backoff, Link
from edge.player import NullOutput, Player, WavDirOutput
from edge.settings import EdgeSettings, default_device
from edge.sources import StdinSource, WavSource
from tests.conftest import SPEECH, free_port
from voxqueue.audio import rms
from voxqueue.contracts import TurnEvent
from voxqueue.settings import RedisSettings, Settings


def test_settings_from_the_environment(monkeypatch):
    monkeypatch.setenv("VOXQUEUE_EDGE_WAKE_WORDS", "Hey Jarvis, alexa")
    monkeypatch.setenv("VOXQUEUE_EDGE_SILENCE", "relaxed")
    monkeypatch.setenv("VOXQUEUE_EDGE_DEVICE", "kitchen")
    s = EdgeSettings(_env_file=None)  # type: ignore[call-arg]
    assert s.wake_words == ["hey_jarvis", "alexa"]
    assert s.trailing_silence_s == 1.25
    assert s.device == "kitchen"
    assert EdgeSettings(_env_file=None, silence="0.4").trailing_silence_s == 0.4  # type: ignore[call-arg]
    assert s.cooldown_s == 2.0


@pytest.mark.parametrize(
    "bad",
    [
        {"wake_words": ["hey_siri"]},
        {"wake_words": []},
        {"silence": "sleepy"},
        {"silence": "30"},
        {"device": "a b"},
        {"vad": "silero"},
    ],
)
def test_bad_settings_are_refused(bad):
    with pytest.raises(ValidationError):
        EdgeSettings(_env_file=None, **bad)  # type: ignore[call-arg]


def test_the_default_device_is_a_valid_id():
    assert default_device()
    EdgeSettings(_env_file=None, device=default_device())  # type: ignore[call-arg]


def test_sources_give_whole_frames(tmp_path):
    frames = list(WavSource(SPEECH / "command_time.wav").frames())
    assert all(len(f) == FRAME_BYTES for f in frames)
    raw = tmp_path / "audio.raw"
    raw.write_bytes(b"\x01\x00" * 500)  # 3 frames and a bit
    with raw.open("rb") as f:
        source = StdinSource(f)
        assert not source.live  # a regular file: read as fast as possible
        got = list(source.frames())
    assert len(got) == 4 and got[-1].endswith(bytes(FRAME_BYTES - 40))
    r, w = os.pipe()
    with os.fdopen(r, "rb") as pipe, os.fdopen(w, "wb"):
        assert StdinSource(pipe).live  # a pipe (arecord | ...) is live


def test_realtime_reading_takes_as_long_as_the_audio():
    source = WavSource(SPEECH / "silence_5s.wav", realtime=True)
    frames = source.frames()
    start = time.monotonic()
    for _ in range(30):
        next(frames)
    assert source.live and time.monotonic() - start >= 0.28


def test_a_missing_or_broken_wav_is_a_clear_error(tmp_path):
    from edge.sources import SourceError

    with pytest.raises(SourceError, match="cannot read"):
        WavSource(tmp_path / "nope.wav")
    (tmp_path / "junk.wav").write_bytes(b"junk" * 100)
    with pytest.raises(SourceError, match="not a WAV"):
        WavSource(tmp_path / "junk.wav")


def test_player_writes_one_file_per_reply_and_stops_on_request(tmp_path):
    player = Player(WavDirOutput(tmp_path), realtime=False)
    tone = earcon("sorry")
    done = player.play([tone, tone], "turn-abc")
    assert not done.stopped and done.bytes == 2 * len(tone)
    with wave.open(str(done.path)) as w:
        assert w.getframerate() == 16000 and w.readframes(w.getnframes()) == tone + tone
    stop = threading.Event()

    def chunks():
        yield tone
        stop.set()  # a barge-in while the second chunk is awaited
        yield tone

    cut = player.play(chunks(), "turn-def", stop)
    assert cut.stopped and cut.bytes == len(tone)
    assert [p.name for p in sorted(tmp_path.iterdir())] == ["001-turn-abc.wav", "002-turn-def.wav"]


def test_a_paced_player_stops_within_a_piece():
    player = Player(NullOutput(), realtime=True)
    stop = threading.Event()
    threading.Timer(0.3, stop.set).start()
    played = player.play([bytes(32000 * 5)], "long", stop)
    assert played.stopped and 0.2 <= played.seconds < 5.0  # cut within the 5 s piece


def test_earcons_are_short_and_distinct():
    sounds = {name: earcon(name) for name in ("unreachable", "sorry")}
    for pcm in sounds.values():
        assert 0.1 < len(pcm) / 32000 < 1.0 and rms(pcm) > 1000
        samples = np.frombuffer(pcm, dtype="<i2")
        assert abs(int(samples[0])) < 500 and abs(int(samples[-1])) < 500  # no click
    assert len(set(sounds.values())) == 2
    with pytest.raises(KeyError):
        earcon("fanfare")


def test_announcement_entries_are_parsed():
    e = b'{"v":1,"type":"announcement","kind":"timer","text":"Tea is ready.","ts":1700000000}'
    item = parse(b"1-0", {b"e": e})
    assert item is not None and (item.kind, item.text, item.ts, item.pcm) == (
        "timer",
        "Tea is ready.",
        1700000000.0,
        None,
    )
    with_audio = parse("2-0", {b"e": e, b"pcm": b"\x01\x02"})
    assert with_audio is not None and with_audio.pcm == b"\x01\x02"
    assert parse(b"3-0", {b"e": b"not json"}) is None
    assert parse(b"4-0", {b"e": b'{"type":"something-else","text":"x"}'}) is None
    assert parse(b"5-0", {b"e": b'{"type":"announcement","text":"  "}'}) is None


def test_a_link_tells_each_outage_once():
    calls: list[str] = []
    link = Link("redis", lambda n, r: calls.append(f"down {r}"), lambda n: calls.append("up"))
    link.ok()
    assert link.failed("refused") is True
    assert link.failed("refused again") is False
    link.ok()
    link.ok()
    assert link.failed("reset") is True
    assert calls == ["down refused", "up", "down reset"]
    assert link.outages == 2


def test_backoff_grows_to_its_cap_and_resets():
    b = Backoff(first_s=0.5, max_s=4.0)
    delays = [b.next() for _ in range(6)]
    assert 0.4 <= delays[0] <= 0.6 and all(d <= 4.8 for d in delays)
    assert delays[4] >= 3.2
    b.reset()
    assert b.next() <= 0.6


def test_turn_events_are_described_for_the_terminal():
    def ev(type_: str, **data: object) -> TurnEvent:
        return TurnEvent(type=type_, turn_id="t" * 12, data=data)  # type: ignore[arg-type]

    assert describe(ev("tts-chunk", seq=0)) is None
    assert "You:" in (describe(ev("stt-end", text="hello [world]")) or "")
    assert "Assistant:" in (describe(ev("reply", text="hi")) or "")
    assert "run-end ok" in (describe(ev("run-end", status="ok", ms=12)) or "")
    assert "get_time" in (
        describe(ev("tool-end", name="get_time", arguments={}, result="noon", error=None, ms=3))
        or ""
    )
    screen = io.StringIO()
    Display(Console(file=screen, width=200)).turn_event("abc", ev("stt-end", text="[b]x[/b]"))
    assert "[b]x[/b]" in screen.getvalue()  # what the user said is shown, not interpreted


def test_a_device_whose_server_is_gone_keeps_listening_and_tells_once(tmp_path):
    """No Redis at all: two commands fail politely, the outage is told once, nothing crashes."""
    url = f"redis://127.0.0.1:{free_port()}/0"
    two = tmp_path / "two.wav"
    with wave.open(str(SPEECH / "edge_two_turns.wav")) as w:
        pcm = w.readframes(w.getnframes())
    with wave.open(str(two), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(pcm + bytes(32000))
    screen = io.StringIO()
    device = Device(
        EdgeSettings(
            _env_file=None,
            device="lonely",  # type: ignore[call-arg]
            wake_words=["hey_jarvis", "okay_nabu"],
        ),
        Settings(redis=RedisSettings(url=url)),
        WavSource(two),
        Player(WavDirOutput(tmp_path / "out"), realtime=False),
        Display(Console(file=screen, width=200)),
    )
    device.run()
    text = screen.getvalue()
    assert [t.status for t in device.turns] == ["unsent", "unsent"], text
    assert text.count("Cannot reach the server") == 1, text
    sounds = sorted(p.name.split("-", 1)[1] for p in (tmp_path / "out").iterdir())
    assert sounds.count("earcon-unreachable.wav") == 1, sounds
    assert not list((tmp_path / "out").glob("*turn-*"))


def test_frames_of_pads_the_last_frame():
    frames = list(frames_of(b"\x01" * (FRAME_BYTES + 10)))
    assert len(frames) == 2 and frames[1] == b"\x01" * 10 + bytes(FRAME_BYTES - 10)


def test_wav_dir_output_continues_numbering(tmp_path: Path):
    (tmp_path / "007-old.wav").write_bytes(b"")
    stream = WavDirOutput(tmp_path).open("turn-x")
    stream.close(abort=False)
    assert (tmp_path / "008-turn-x.wav").exists()


def test_a_new_conversation_gets_a_random_session_id():
    """Not a clock: an id another party could guess is one it could name (#44)."""
    from edge.conversation import Conversation
    from edge.settings import EdgeSettings

    edge = EdgeSettings(_env_file=None, device="kitchen", session_idle_s=0.001)  # type: ignore[call-arg]
    first = Conversation(edge).session_id()
    time.sleep(0.01)
    again = Conversation(edge).session_id()
    assert first.startswith("kitchen.") and again.startswith("kitchen.")
    assert first != again and len(first.split(".", 1)[1]) == 16
