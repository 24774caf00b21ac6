"""The Wyoming server's parts that need no connection: who may connect, how large an event may
be, the audio a client sends, what the server says it is, and conversation ids."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import SecretStr
from wyoming.audio import AudioChunk, AudioStart

from voxqueue.settings import ProviderSettings, Settings
from voxqueue.wyoming.audio_in import AudioIn, AudioTooLarge
from voxqueue.wyoming.describe import describe
from voxqueue.wyoming.guard import (
    CappedReader,
    EventTooLarge,
    PeerRate,
    RateLimited,
    WyomingPolicy,
    allowed,
    networks,
)
from voxqueue.wyoming.requests import session_of

DEFAULT_ALLOW = networks(Settings().wyoming.allow)


@pytest.mark.parametrize(("peer", "ok"), [
    (("127.0.0.1", 5000), True),
    (("::1", 5000, 0, 0), True),
    (("::ffff:127.0.0.1", 5000, 0, 0), True),
    # Any other host of the LAN is not served until named (Home Assistant's address).
    (("192.168.1.20", 5000), False),
    (("10.1.2.3", 5000), False),
    (("172.17.0.1", 5000), False),
    (("::ffff:192.168.1.20", 5000, 0, 0), False),
    (("fd00::2", 5000, 0, 0), False),
    (("fe80::1%eth0", 5000, 0, 2), False),
    (("8.8.8.8", 5000), False),
    (("2001:4860::8888", 5000, 0, 0), False),
    (("::ffff:8.8.8.8", 5000, 0, 0), False),
    ("", True),  # a Unix socket: local
])
def test_only_loopback_by_default(peer, ok):
    assert allowed(peer, DEFAULT_ALLOW) is ok


def test_home_assistants_address_once_named_is_served():
    allow = networks("127.0.0.0/8,192.168.1.10/32")
    assert allowed(("192.168.1.10", 5000), allow)
    assert not allowed(("192.168.1.11", 5000), allow)


def test_wyoming_turns_run_as_one_device_with_no_side_effects_by_default(monkeypatch):
    for name in ("DEVICE", "TOOLS", "TURNS_PER_MINUTE"):
        monkeypatch.delenv(f"VOXQUEUE_WYOMING_{name}", raising=False)
    policy = WyomingPolicy(_env_file=None)  # type: ignore[call-arg]
    assert policy.device == "wyoming" and policy.effects_allowed == ()
    named = WyomingPolicy(_env_file=None, tools=" set_timer, remember ")  # type: ignore[call-arg]
    assert named.effects_allowed == ("set_timer", "remember")
    assert WyomingPolicy(_env_file=None, tools="*").effects_allowed is None  # type: ignore[call-arg]
    with pytest.raises(ValueError):  # a device name that could be read as two
        WyomingPolicy(_env_file=None, device="ha.kitchen")  # type: ignore[call-arg]


def test_the_rate_is_per_client_address_over_a_sliding_minute():
    now = [1000.0]
    rate = PeerRate(3, clock=lambda: now[0])
    for _ in range(3):
        rate.hit(("192.168.1.10", 40000))
    rate.hit(("192.168.1.11", 40001))  # another address has its own count
    with pytest.raises(RateLimited, match=r"over 3 requests a minute.*try again in 60 s"):
        rate.hit(("192.168.1.10", 40002))  # a new connection (port) is the same address
    now[0] += 30
    with pytest.raises(RateLimited, match="try again in 30 s"):  # refusals are not counted
        rate.hit(("192.168.1.10", 40003))
    now[0] += 30.5
    rate.hit(("192.168.1.10", 40004))


def test_a_wrong_network_is_a_clear_error():
    with pytest.raises(ValueError, match=r"VOXQUEUE_WYOMING_ALLOW.*'10\.0\.0\.0/33'"):
        networks("127.0.0.0/8, 10.0.0.0/33")


def test_capped_reader_refuses_a_part_over_the_cap():
    async def go() -> None:
        stream = asyncio.StreamReader()
        stream.feed_data(b'{"type": "x"}\n' + b"a" * 200)
        reader = CappedReader(stream, cap=100)
        assert await reader.readline() == b'{"type": "x"}\n' == reader.last_line
        assert await reader.readexactly(100) == b"a" * 100
        with pytest.raises(EventTooLarge, match="101 bytes"):
            await reader.readexactly(101)

    asyncio.run(go())


def test_a_header_over_the_line_limit_is_too_large():
    async def go() -> None:
        stream = asyncio.StreamReader(limit=1024)
        stream.feed_data(b"{" + b" " * 5000 + b"}\n")
        with pytest.raises(EventTooLarge):
            await CappedReader(stream, cap=10**6).readline()

    asyncio.run(go())


def test_audio_in_converts_to_16k_mono_passes_it_on_and_refuses_too_much():
    written: list[bytes] = []

    class Collect:
        def write(self, pcm: bytes) -> None:
            written.append(pcm)

    audio = AudioIn(AudioStart(rate=48000, width=2, channels=2), max_bytes=32000, sink=Collect())
    one_second = b"\x10\x00\x20\x00" * 48000  # 48 kHz stereo
    audio.add(AudioChunk(rate=48000, width=2, channels=2, audio=one_second[:len(one_second) // 2]))
    assert abs(len(b"".join(written)) - 16000) <= 4  # half a second of 16 kHz 16-bit mono
    with pytest.raises(AudioTooLarge, match="VOXQUEUE_MAX_AUDIO_BYTES"):
        audio.add(AudioChunk(rate=48000, width=2, channels=2, audio=one_second))
    assert len(written) == 1  # what was over the limit was not passed on


def test_describe_offline_names_the_offline_engines():
    settings = Settings(providers=ProviderSettings(stt="pocketsphinx", llm="local", tts="piper"))
    info = describe(settings)
    assert info.asr[0].models[0].name == "pocketsphinx"
    assert info.asr[0].models[0].attribution.name == "CMU PocketSphinx"
    assert info.tts[0].voices[0].name == "joe-us" and info.tts[0].supports_synthesize_streaming
    assert info.handle[0].models[0].name == "local intents"
    assert all(p.installed for p in (*info.asr, *info.tts, *info.handle))


def test_describe_with_keys_names_the_cloud_providers():
    settings = Settings(providers=ProviderSettings(openai_api_key=SecretStr("sk-x"),
                                                   elevenlabs_api_key=SecretStr("el-x")))
    info = describe(settings)
    assert info.asr[0].models[0].name == "openai"
    assert info.tts[0].voices[0].name == settings.providers.tts_voice
    assert info.handle[0].models[0].name == settings.providers.llm_model
    assert "sk-x" not in info.event().to_dict().__repr__()


def test_conversation_ids_name_safe_sessions():
    cid, session = session_of({"conversation_id": "01J9/../x y"})
    assert cid == "01J9/../x y" and session == "wyoming:01J9_.._x_y"
    new_cid, new_session = session_of(None)
    assert len(new_cid) == 32 and new_session == f"wyoming:{new_cid}"
    assert len(session_of({"conversation_id": "z" * 500})[1]) == len("wyoming:") + 100


def test_describe_reports_what_the_workers_run_over_its_own_settings():
    """The Wyoming server holds no provider key; the workers say what they built."""
    settings = Settings(providers=ProviderSettings(stt="pocketsphinx", llm="local", tts="piper"))
    info = describe(settings, {"stt": "openai", "llm": "openai", "tts": "elevenlabs"})
    assert info.asr[0].models[0].name == "openai"
    assert info.tts[0].voices[0].attribution.name == "ElevenLabs"
    assert info.handle[0].models[0].name == settings.providers.llm_model
