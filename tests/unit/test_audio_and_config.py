"""Audio checks and conversion; the Celery configuration's guarantees; settings."""

from __future__ import annotations

import io
import wave

import numpy as np
import pytest

from tests.conftest import SPEECH
from voxqueue.audio import AudioError, from_pcm, read_wav, rms, to_wav
from voxqueue.celery_config import celery_config, queue_of, route_task
from voxqueue.settings import MissingKeyError, RedisSettings, Settings

LIMITS = {"max_bytes": 10_000_000, "max_seconds": 60.0}


def wav_bytes(samples: np.ndarray, rate: int, channels: int, width: int = 2) -> bytes:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(width)
        w.setframerate(rate)
        w.writeframes(samples.astype("<i2").tobytes())
    return buf.getvalue()


def test_fixture_reads_as_16k_mono():
    pcm = read_wav((SPEECH / "command_time.wav").read_bytes(), **LIMITS)
    assert pcm.rate == 16000 and 2.0 < pcm.seconds < 6.0 and rms(pcm.data) > 100


def test_stereo_44k_is_converted_not_refused():
    t = np.arange(44100) / 44100
    tone = (np.sin(2 * np.pi * 440 * t) * 8000).astype(np.int16)
    stereo = np.stack([tone, tone], axis=1).reshape(-1)
    pcm = read_wav(wav_bytes(stereo, 44100, 2), **LIMITS)
    assert pcm.seconds == pytest.approx(1.0, abs=0.01)
    assert rms(pcm.data) == pytest.approx(8000 / np.sqrt(2), rel=0.05)


@pytest.mark.parametrize(("data", "code", "fragment"), [
    (b"", "audio-invalid", "empty"),
    (b"hello world, not audio", "audio-invalid", "not a WAV"),
    (b"RIFF\x00\x00\x00\x00WAVEfmt ", "audio-invalid", "cannot be read"),
])
def test_bad_audio_gets_a_clear_error(data, code, fragment):
    with pytest.raises(AudioError) as err:
        read_wav(data, **LIMITS)
    assert err.value.code == code and fragment in str(err.value)


def test_truncated_wav_is_refused_or_trimmed():
    whole = (SPEECH / "command_time.wav").read_bytes()
    with pytest.raises(AudioError):
        read_wav(whole[:44], **LIMITS)  # header only: no samples
    pcm = read_wav(whole[: len(whole) // 2], **LIMITS)  # half the samples: still usable
    assert pcm.seconds > 0.5


def test_limits_on_size_and_duration():
    data = (SPEECH / "command_time.wav").read_bytes()
    with pytest.raises(AudioError, match="VOXQUEUE_MAX_AUDIO_BYTES") as err:
        read_wav(data, max_bytes=1000, max_seconds=60)
    assert err.value.code == "audio-too-large"
    with pytest.raises(AudioError, match="VOXQUEUE_MAX_AUDIO_SECONDS") as err:
        read_wav(data, max_bytes=10**9, max_seconds=1.0)
    assert err.value.code == "audio-too-long"
    with pytest.raises(AudioError, match=r"over the limit"):
        from_pcm(b"\0\0" * 16000 * 3, max_bytes=10**9, max_seconds=2.0)


def test_wav_round_trip():
    pcm = (np.arange(1600) % 100).astype("<i2").tobytes()
    assert read_wav(to_wav(pcm), **LIMITS).data == pcm


def test_celery_config_is_json_only_with_late_acks():
    conf = celery_config(Settings(redis=RedisSettings(visibility_timeout=900)))
    assert conf["accept_content"] == ["json"] and conf["task_serializer"] == "json"
    assert conf["result_accept_content"] == ["json"]
    assert conf["task_acks_late"] and conf["task_reject_on_worker_lost"]
    assert conf["worker_prefetch_multiplier"] == 1
    assert conf["broker_transport_options"]["visibility_timeout"] == 900
    assert conf["worker_send_task_events"] and not conf["task_send_sent_event"]
    assert {q.name for q in conf["task_queues"]} == {"stt", "agent", "tools", "tts", "monitor"}
    from voxqueue.celery_config import TIME_LIMITS

    assert max(TIME_LIMITS.values()) < 900


def test_routing_by_task_name():
    assert queue_of("voxqueue.tools.run") == "tools"
    assert route_task("voxqueue.tts.speak", (), {}, {}) == {"queue": "tts"}
    assert route_task("something.else", (), {}, {}) is None
    with pytest.raises(ValueError):
        queue_of("voxqueue.nope.x")


def test_settings_read_the_sdk_variables(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-abc")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
    monkeypatch.setenv("ELEVENLABS_API_KEY", "el-abc")
    monkeypatch.setenv("VOXQUEUE_ELEVENLABS_BASE_URL", "http://127.0.0.1:2")
    monkeypatch.setenv("VOXQUEUE_MAX_STEPS", "3")
    s = Settings()
    assert s.providers.require_openai_key("x") == "sk-abc"
    assert s.providers.openai_base_url == "http://127.0.0.1:1/v1"
    assert s.providers.require_elevenlabs_key() == "el-abc"
    assert s.providers.elevenlabs_base_url == "http://127.0.0.1:2"
    assert s.agent.max_steps == 3
    assert "sk-abc" not in repr(s) and "el-abc" not in repr(s)


def test_missing_key_names_the_variable(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(MissingKeyError, match="OPENAI_API_KEY"):
        Settings().providers.require_openai_key("LLM (OpenAI)")
