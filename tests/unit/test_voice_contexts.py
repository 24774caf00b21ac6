"""ElevenLabs' multi-context input stream through ``VoiceContexts`` and its ``VoiceSocket``
against the fake voice: each context's audio and end, TLS, and every way it fails."""

from __future__ import annotations

import base64
import json
import socket
import ssl
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme

from bench.voice_contexts import (
    Audio,
    Done,
    VoiceContexts,
    _event,
    socket_url,
)
from bench.voice_socket import VoiceSocket
from tests.conftest import free_port
from tests.fakes import FakeProviders
from tests.fakes.provider_server import spoken_pcm
from voxqueue.settings import Settings
from workers.runtime.retry import ProviderError

FIRST, SECOND = "Tomorrow will be sunny", "in Lisbon with a high of twenty four degrees."


def audio_bytes(text: str) -> int:
    """What the fake voice speaks for one generation of ``text`` (16 kHz, 16-bit)."""
    return len(spoken_pcm(text))


def settings_for(base_url: str) -> Settings:
    return Settings(_env_file=None, elevenlabs_api_key="el-test",  # type: ignore[call-arg]
                    elevenlabs_base_url=base_url)


@pytest.fixture
def fake() -> Iterator[FakeProviders]:
    with FakeProviders(profile={"tts_ttfb_s": 0.02, "tts_rtf": 0.1}) as server:
        yield server


def spoken(voice: VoiceContexts) -> tuple[dict[str, int], list[str]]:
    """Each context's audio bytes, and the contexts in the order they ended, until none of
    those spoken is left."""
    sizes: dict[str, int] = {}
    done = []
    for event in voice.events():
        if isinstance(event, Audio):
            sizes[event.context] = sizes.get(event.context, 0) + len(event.pcm)
        else:
            done.append(event.context)
            if not voice.speaking:
                break
    return sizes, done


def test_each_context_gets_its_audio_and_its_end(fake: FakeProviders) -> None:
    with VoiceContexts(settings_for(fake.elevenlabs_base_url),
                       deadline=time.time() + 30) as voice:
        voice.speak("0", FIRST)
        voice.speak("1", SECOND)
        sizes, done = spoken(voice)
    assert sizes == {"0": audio_bytes(FIRST), "1": audio_bytes(SECOND)}
    assert sorted(done) == ["0", "1"]
    (record,) = fake.requests_for("tts-input")
    assert record["query"] == {"model_id": "eleven_flash_v2_5", "output_format": "pcm_16000"}
    assert "/JBFqnCBsd6RMkjVDRZzb/multi-stream-input" in record["path"]
    assert fake.seen_keys == {"el-test"}


def test_the_events_end_when_the_voice_closes_with_every_context_done(
        fake: FakeProviders) -> None:
    with VoiceContexts(settings_for(fake.elevenlabs_base_url),
                       deadline=time.time() + 30) as voice:
        voice.speak("0", FIRST)
        voice.socket.send(json.dumps({"close_socket": True}))
        events = list(voice.events())
    assert events[-1] == Done("0") and not voice.speaking


def test_more_contexts_may_follow_on_the_same_connection(fake: FakeProviders) -> None:
    with VoiceContexts(settings_for(fake.elevenlabs_base_url),
                       deadline=time.time() + 30) as voice:
        voice.speak("0", FIRST)
        assert spoken(voice)[1] == ["0"]
        voice.speak("1", SECOND)
        assert spoken(voice) == ({"1": audio_bytes(SECOND)}, ["1"])
    assert len(fake.requests_for("tts-input")) == 1


def test_over_tls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ca = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_context)
    pem = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(pem))
    monkeypatch.setenv("SSL_CERT_FILE", str(pem))  # trusted as a system CA would be
    with FakeProviders(ssl_context=server_context) as fake:
        assert socket_url(settings_for(fake.elevenlabs_base_url)).startswith("wss://")
        with VoiceContexts(settings_for(fake.elevenlabs_base_url),
                           deadline=time.time() + 30) as voice:
            voice.speak("0", FIRST)
            assert spoken(voice) == ({"0": audio_bytes(FIRST)}, ["0"])


def test_an_untrusted_certificate_is_refused(tmp_path: Path) -> None:
    ca = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_context)
    with FakeProviders(ssl_context=server_context) as fake, pytest.raises(ProviderError):
        VoiceContexts(settings_for(fake.elevenlabs_base_url), deadline=time.time() + 30)


@pytest.mark.parametrize(("status", "headers", "retryable", "retry_after"), [
    (503, {}, True, None),
    (429, {"retry-after-ms": "200"}, True, 0.2),
    (401, {}, False, None),
])
def test_a_refused_upgrade_is_a_provider_error(
        fake: FakeProviders, status: int, headers: dict[str, str], retryable: bool,
        retry_after: float | None) -> None:
    fake.inject("tts-input", status=status, headers=headers)
    with pytest.raises(ProviderError) as failed:
        VoiceContexts(settings_for(fake.elevenlabs_base_url), deadline=time.time() + 30)
    assert failed.value.status == status
    assert failed.value.retryable is retryable
    assert failed.value.retry_after == retry_after


def test_an_unreachable_voice_is_retryable() -> None:
    with pytest.raises(ProviderError) as failed:
        VoiceContexts(settings_for(f"http://127.0.0.1:{free_port()}"),
                      deadline=time.time() + 5)
    assert failed.value.retryable


def test_a_voice_that_goes_away_mid_stream_ends_the_events(fake: FakeProviders) -> None:
    fake.set_profile(tts_rtf=1.0)  # slow enough to stop the server meanwhile
    voice = VoiceContexts(settings_for(fake.elevenlabs_base_url), deadline=time.time() + 30)
    voice.speak("0", SECOND)
    events = voice.events()
    assert isinstance(next(events), Audio)
    fake.stop()
    with pytest.raises(ProviderError):
        list(events)
    voice.close()


@pytest.mark.parametrize("raw", [
    b"not json", b"[1]", b'{"audio": "***", "contextId": "0"}',
    b'{"message": "The key was refused.", "error": "auth_error", "code": 1008}',
])
def test_a_malformed_or_error_message_is_a_provider_error(raw: bytes) -> None:
    with pytest.raises(ProviderError):
        _event(raw)


def test_messages_are_read_as_events() -> None:
    pcm = b"\x01\x00" * 4
    assert _event(json.dumps({"audio": base64.b64encode(pcm).decode(), "contextId": "3",
                              "normalizedAlignment": None, "alignment": None}).encode()) \
        == Audio("3", pcm)
    assert _event(b'{"isFinal": true, "contextId": "3"}') == Done("3")


class CountingSocket:
    """A socket that counts its reads."""

    def __init__(self, sock: Any) -> None:
        self.sock, self.reads = sock, 0

    def recv(self, n: int) -> bytes:
        self.reads += 1
        return bytes(self.sock.recv(n))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sock, name)


def test_the_socket_reads_what_piled_up_in_one_read() -> None:
    """A pause lets the voice's frames pile up; the next read takes them all."""
    with FakeProviders(profile={"tts_ttfb_s": 0.0, "tts_rtf": 0.0}) as fake:
        url = fake.elevenlabs_base_url.replace("http", "ws", 1)
        with VoiceSocket(f"{url}/v1/text-to-speech/v/stream-input?output_format=pcm_16000",
                         {"xi-api-key": "el-test"}, timeout=10) as ws:
            ws.sock = counting = CountingSocket(ws.sock)  # type: ignore[assignment]
            ws.send(json.dumps({"text": " "}))
            ws.send(json.dumps({"text": "A sentence of about three seconds of speech."}))
            ws.send(json.dumps({"text": ""}))
            time.sleep(0.5)  # everything is sent meanwhile
            got = [json.loads(m) for m in ws.messages()]
    assert got[-1] == {"isFinal": True} and len(got) > 25
    assert counting.reads <= 4


def test_a_read_that_waits_too_long_times_out(fake: FakeProviders) -> None:
    url = fake.elevenlabs_base_url.replace("http", "ws", 1)
    with VoiceSocket(f"{url}/v1/text-to-speech/v/stream-input?output_format=pcm_16000",
                     {"xi-api-key": "el-test"}, timeout=0.3) as ws:
        ws.send(json.dumps({"text": " "}))  # nothing to say: nothing comes
        with pytest.raises((TimeoutError, socket.timeout)):
            next(ws.messages())
