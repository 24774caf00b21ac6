"""The fake ElevenLabs input stream (``/v1/text-to-speech/{voice}/stream-input``), driven by the
official SDK's ``convert_realtime`` over TLS, and its protocol's edges by websockets' threaded
client (as ``voxqueue.tls_websocket`` serializes its TLS session)."""

from __future__ import annotations

import base64
import json
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import elevenlabs
import pytest
import trustme
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import ClientConnection

from testkit.fakes import FakeProviders
from testkit.fakes.provider_server import spoken_pcm
from voxqueue.tls_websocket import connect


def audio_bytes(text: str) -> int:
    """What the fake voice speaks for one generation of ``text`` (16 kHz, 16-bit)."""
    return len(spoken_pcm(text))


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


def serving(ca: trustme.CA, *, tickets: bool = True) -> FakeProviders:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    if not tickets:
        context.num_tickets = 0
    return FakeProviders(ssl_context=context)


@pytest.fixture
def fake(ca: trustme.CA) -> Iterator[FakeProviders]:
    with serving(ca) as server:
        yield server


@pytest.fixture
def fake_without_tickets(ca: trustme.CA) -> Iterator[FakeProviders]:
    """For the SDK's own client (websockets' threaded one): it reads and writes its TLS session
    from two threads at once, and a TLS 1.3 session ticket arriving as it sends its upgrade
    can hang it for good (``voxqueue/tls_websocket.py``); with no tickets it cannot."""
    with serving(ca, tickets=False) as server:
        yield server


@pytest.fixture
def trusting(ca: trustme.CA, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ssl.SSLContext:
    """The CA trusted by default contexts (the SDK's WebSocket helper makes its own)."""
    pem = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(pem))
    monkeypatch.setenv("SSL_CERT_FILE", str(pem))
    context = ssl.create_default_context()
    ca.configure_trust(context)
    return context


def test_the_sdks_realtime_helper_gets_the_audio_of_its_text(
        fake_without_tickets: FakeProviders, trusting: ssl.SSLContext) -> None:
    fake = fake_without_tickets
    client = elevenlabs.ElevenLabs(api_key="el-test", base_url=fake.elevenlabs_base_url)
    texts = ["Tomorrow will be sunny in Lisbon, ", "with a high of twenty four degrees. ",
             "Expect a light breeze from the west."]
    audio = b"".join(client.text_to_speech.convert_realtime(
        "voice-1", text=iter(texts), model_id="eleven_flash_v2_5", output_format="pcm_16000"))
    (record,) = fake.requests_for("tts-input")
    assert record["query"] == {"model_id": "eleven_flash_v2_5", "output_format": "pcm_16000"}
    assert record["texts"][-1] == ""  # the end of the input
    assert "".join(record["texts"]).split() == " ".join(texts).split()
    # the SDK asks for a generation every 50 characters: the text is spoken whole, in parts
    assert " ".join(record["spoken"]).split() == " ".join(texts).split()
    assert len(record["spoken"]) >= 2
    assert len(audio) == sum(audio_bytes(t) for t in record["spoken"]) == record["audio_bytes"]
    assert "el-test" in fake.seen_keys


def open_stream(fake: FakeProviders, context: ssl.SSLContext, *, key: str | None = "el-test",
                output_format: str = "pcm_16000") -> ClientConnection:
    url = fake.elevenlabs_base_url.replace("https", "wss", 1)
    headers = {"xi-api-key": key} if key else {}
    return connect(f"{url}/v1/text-to-speech/v1/stream-input?output_format={output_format}",
                   ssl=context, additional_headers=headers)


def messages(ws: ClientConnection) -> list[dict[str, Any]]:
    out = []
    try:
        while True:
            out.append(json.loads(ws.recv(timeout=10)))
    except ConnectionClosed:
        return out


def test_flush_speaks_at_once_and_the_end_closes_the_stream(
        fake: FakeProviders, trusting: ssl.SSLContext) -> None:
    with open_stream(fake, trusting) as ws:
        ws.send(json.dumps({"text": " ", "generation_config": {"chunk_length_schedule": [500]}}))
        ws.send(json.dumps({"text": "First sentence. ", "flush": True}))
        first = json.loads(ws.recv(timeout=10))  # before any more text is sent
        ws.send(json.dumps({"text": "Second one, "}))
        ws.send(json.dumps({"text": "said at the end."}))
        ws.send(json.dumps({"text": ""}))
        rest = messages(ws)
        assert ws.close_code == 1000
    assert first["isFinal"] is False and base64.b64decode(first["audio"])
    assert rest[-1] == {"isFinal": True}
    pcm = base64.b64decode(first["audio"]) + b"".join(
        base64.b64decode(m["audio"]) for m in rest[:-1])
    (record,) = fake.requests_for("tts-input")
    assert record["spoken"] == ["First sentence.", "Second one, said at the end."]
    assert len(pcm) == audio_bytes("First sentence.") + audio_bytes("Second one, said at the end.")


def test_the_schedule_starts_a_generation_once_enough_text_is_in(
        fake: FakeProviders, trusting: ssl.SSLContext) -> None:
    with open_stream(fake, trusting) as ws:
        ws.send(json.dumps({"text": " ",
                            "generation_config": {"chunk_length_schedule": [20, 40]}}))
        for word in ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
                     "ten", "eleven"):
            ws.send(json.dumps({"text": word + " "}))
        ws.send(json.dumps({"text": ""}))
        messages(ws)
    (record,) = fake.requests_for("tts-input")
    # 24 characters reach the first length; the rest (32) never reaches the next: the end
    assert record["spoken"] == ["one two three four five", "six seven eight nine ten eleven"]


@pytest.mark.parametrize(("first", "key", "error"), [
    ({"text": "Hello"}, "el-test", "invalid_message"),
    ({"text": " "}, None, "auth_error"),
    ("not json", "el-test", "invalid_message"),
])
def test_a_bad_opening_gets_an_error_and_a_1008_close(
        fake: FakeProviders, trusting: ssl.SSLContext, first: Any, key: str | None,
        error: str) -> None:
    with open_stream(fake, trusting, key=key) as ws:
        ws.send(first if isinstance(first, str) else json.dumps(first))
        (answer,) = messages(ws)
        assert ws.close_code == 1008
    assert answer["error"] == error and answer["code"] == 1008


def test_the_key_may_come_in_the_first_message(
        fake: FakeProviders, trusting: ssl.SSLContext) -> None:
    with open_stream(fake, trusting, key=None) as ws:
        ws.send(json.dumps({"text": " ", "xi_api_key": "el-in-message"}))
        ws.send(json.dumps({"text": "Hi."}))
        ws.send(json.dumps({"text": ""}))
        assert messages(ws)[-1] == {"isFinal": True}
    assert "el-in-message" in fake.seen_keys


def test_an_unknown_output_format_is_refused_at_the_upgrade(
        fake: FakeProviders, trusting: ssl.SSLContext) -> None:
    with pytest.raises(InvalidStatus) as refused:
        open_stream(fake, trusting, output_format="mp3_44100_128")
    assert refused.value.response.status_code == 422
