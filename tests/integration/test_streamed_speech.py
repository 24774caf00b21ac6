"""A command written while it is spoken (``Client.stream``): the STT job starts with the speech
and reads the audio as it grows; an abandoned or aborted stream ends its turn with nothing left
behind. Real workers, Redis and the fake providers: OpenAI's Realtime transcription session
(the default for a streamed command), and the upload at the end when that session is refused."""

from __future__ import annotations

import time

import pytest

from testkit.clock import wait_until
from testkit.waiting import tasks_of_turn
from tests.conftest import SPEECH
from voxqueue import InputError
from voxqueue.audio import read_speech
from workers.stt.listening import Pauses

pytestmark = pytest.mark.integration
FRAME = 640  # 20 ms


def pcm_of(name: str) -> bytes:
    return read_speech(SPEECH / name, max_bytes=10**8, max_seconds=600).data


def events_of(turn, kind: str) -> list[dict]:
    return [e.event.data for e in turn._entries if e.event.type == kind]


def test_a_streamed_command_is_answered_and_its_stream_removed(client, fake):
    fake.script_transcripts("What time is it in Tokyo?")
    fake.script_chat({"match": "tokyo", "content": "Late evening in Tokyo."})
    pcm = pcm_of("command_time.wav")
    with client.stream(session="streamed") as speech:
        started = speech.turn
        # the STT job is running before the command ends
        give_up = time.time() + 10
        while not any(e.event.type == "stt-start" for e in client.store.history(started.turn_id)):
            assert time.time() < give_up, "no stt-start while speaking"
            time.sleep(0.05)
        for at in range(0, len(pcm), FRAME):
            speech.write(pcm[at:at + FRAME])
        # The recording ends in silence: a pause, committed, transcribed before the end.
        while not [e for e in client.store.history(started.turn_id)
                   if e.event.type == "stt-partial" and e.event.data["text"]]:
            assert time.time() < give_up, "no words at the pause"
            time.sleep(0.05)
    result = started.wait(timeout=30)
    assert result.status == "ok", result.error
    assert result.transcript == "What time is it in Tokyo?" and result.reply
    (ended,) = events_of(started, "stt-end")
    assert abs(ended["audio_s"] - len(pcm) / 32000) < 0.05  # every frame, once
    assert ended["speech_ended_at"] and ended["heard_live"]
    # Sent as it came, on one Realtime session through the SDK, committed at the pauses.
    (session,) = fake.requests_for("realtime")
    assert session["query"] == {"intent": "transcription"} and session["auth_present"]
    assert session["events"][0] == "session.update" and session["commits"] >= 1
    # At 24 kHz: all the speech; the silence after it is held back once the transcript is
    # ready, so how much of that was sent depends on when the words came back.
    pauses = Pauses(0.2)
    pauses.feed(pcm)
    assert pauses.spoken_until * 1.5 <= session["audio_bytes"] <= len(pcm) * 1.5 + len(pcm) / FRAME
    assert fake.requests_for("transcriptions") == []
    partials = events_of(started, "stt-partial")
    assert partials[-1]["text"] == "What time is it in Tokyo?"
    assert ended["decoded_at_pause"]  # nothing was said after that pause
    assert not client.redis.exists(client.keys.speech(started.turn_id))


def test_a_refused_realtime_session_falls_back_to_the_upload(client, fake):
    fake.inject("realtime", status=503)
    fake.script_transcripts("What time is it in Tokyo?")
    fake.script_chat({"match": "tokyo", "content": "Late evening in Tokyo."})
    pcm = pcm_of("command_time.wav")
    with client.stream(session="streamed-upload") as speech:
        for at in range(0, len(pcm), FRAME):
            speech.write(pcm[at:at + FRAME])
    result = speech.turn.wait(timeout=30)
    assert result.status == "ok", result.error
    assert result.transcript == "What time is it in Tokyo?"
    (ended,) = events_of(speech.turn, "stt-end")
    assert not ended["heard_live"] and not ended["decoded_at_pause"]  # once, at the end
    assert events_of(speech.turn, "stt-partial") == []  # a cloud engine is not asked twice
    assert len(fake.requests_for("transcriptions")) == 1
    assert [r.get("fault") for r in fake.requests_for("realtime")] == [{"status": 503}]


def test_an_aborted_stream_cancels_its_turn(client, fake):
    pcm = pcm_of("command_time.wav")
    with pytest.raises(RuntimeError), client.stream(session="aborted") as speech:
        speech.write(pcm[:16000])
        raise RuntimeError("the microphone went away")
    result = speech.turn.wait(timeout=30)
    assert result.status == "cancelled"
    turn_id = speech.turn.turn_id
    wait_until(lambda: not tasks_of_turn(client.redis, turn_id), "the STT task to stop")
    assert fake.requests_for("transcriptions") == []
    assert not client.redis.exists(client.keys.speech(turn_id))


def test_a_stream_that_stops_without_its_end_fails_clearly(client, fake):
    speech = client.stream(session="abandoned")
    speech.write(pcm_of("command_time.wav")[:32000])
    speech.writer.flush()  # then nothing: the writer died mid-command
    result = speech.turn.wait(timeout=30)
    assert result.status == "error"
    assert result.error["code"] == "audio-stream-stopped", result.error
    assert "went away" in result.error["message"]
    assert not client.redis.exists(client.keys.speech(speech.turn.turn_id))
    assert fake.requests_for("transcriptions") == []


def test_too_much_audio_is_refused_and_the_turn_cancelled(client):
    speech = client.stream(session="too-long")
    limit = client.settings.turns.max_audio_bytes
    with pytest.raises(InputError) as refused:
        for _ in range(limit // 32000 + 2):
            speech.write(bytes(32000))
    assert refused.value.code == "audio-too-large"
    assert speech.turn.wait(timeout=30).status == "cancelled"
