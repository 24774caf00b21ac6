"""The gateway as an attacker meets it, with one device token (or none, or a revoked one): each
test is a finding of the second review (issue #44), tried against ``voxqueue gateway`` in its
own process in front of real workers, with small limits so that each attack is short."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import threading
import time
import uuid
import wave
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import websockets.sync.client as wsc
from pydantic import SecretStr
from websockets.exceptions import ConnectionClosed

from testkit.clock import wait_until
from tests.conftest import ROOT, SPEECH
from tests.integration.test_gateway import VOXQUEUE, Gateway, running_gateway
from voxqueue.client.gateway import GatewayClient
from voxqueue.gateway.devices import DeviceRegistry
from voxqueue.settings import GatewaySettings, Settings

pytestmark = pytest.mark.integration

LIMITS = {
    "VOXQUEUE_GATEWAY_TURNS_PER_MINUTE": "20",
    "VOXQUEUE_GATEWAY_SPEAK_CHARS_PER_MINUTE": "300",
    "VOXQUEUE_GATEWAY_AUDIO_SECONDS_PER_MINUTE": "6",
    "VOXQUEUE_GATEWAY_SOCKETS_PER_DEVICE": "2",
    "VOXQUEUE_GATEWAY_POLLS_PER_DEVICE": "2",
    "VOXQUEUE_GATEWAY_REDIS_POOL": "8",
    "VOXQUEUE_GATEWAY_HEADER_TIMEOUT_S": "1",
    "VOXQUEUE_GATEWAY_STREAM_MAX_FRAMES": "300",
    "VOXQUEUE_GATEWAY_STREAM_GRACE_S": "1",
    "VOXQUEUE_GATEWAY_REPLY_TTL_S": "10",
    "VOXQUEUE_MAX_AUDIO_SECONDS": "5",
}


@pytest.fixture(scope="module")
def gateway(system, tmp_path_factory) -> Iterator[Gateway]:
    with running_gateway(system, tmp_path_factory.mktemp("attacked"), **LIMITS) as running:
        yield running


def pcm_of(name: str, seconds: float | None = None) -> bytes:
    with wave.open(str(SPEECH / name)) as w:
        pcm = w.readframes(w.getnframes())
    return pcm if seconds is None else pcm[:int(seconds * 32000)]


def frames(pcm: bytes, size: int = 640) -> list[bytes]:
    return [pcm[i:i + size] for i in range(0, len(pcm), size)]


def socket_of(gateway: Gateway, device: GatewayClient, **params: Any) -> wsc.ClientConnection:
    query = "&".join(f"{k}={v}" for k, v in params.items())
    url = gateway.url.replace("http", "ws", 1) + "/v1/turns/stream?" + query
    return wsc.connect(url, additional_headers={"Authorization": device.http.headers[
        "Authorization"]}, open_timeout=5)


def refusal(ws: wsc.ClientConnection, timeout: float = 10) -> dict[str, Any]:
    """The error the gateway sent before closing the socket (a turn message is skipped)."""
    try:
        while True:
            said = json.loads(ws.recv(timeout=timeout))
            if said.get("type") == "error":
                return said
    except ConnectionClosed:
        return {"type": "closed"}


def name() -> str:
    return f"atk-{uuid.uuid4().hex[:8]}"


# -- H4: one device cannot fill Redis ------------------------------------------------------------
def test_speak_is_budgeted_in_characters_per_device(gateway, fake, reliability_case):
    case = reliability_case("gateway: /v1/speak past the device's characters a minute")
    with gateway.device() as device:
        first = device.http.post("/v1/speak", json={"text": "word " * 50})  # 250 characters
        second = device.http.post("/v1/speak", json={"text": "word " * 50})
    assert first.status_code == 201, first.text
    assert second.status_code == 429 and second.json()["code"] == "rate-limited"
    assert 1 <= int(second.headers["Retry-After"]) <= 61
    case.refused()
    case.note("the second 250 characters within a minute refused (429, Retry-After)")


def test_reply_audio_is_deleted_once_read_and_the_turn_expires_soon(gateway, fake, client,
                                                                    reliability_case):
    case = reliability_case("gateway: reply audio left in Redis after the device read it")
    with gateway.device() as device:
        turn = device.speak("The tea is ready and the kettle has been switched off for you.")
        chunks = list(turn.playback(timeout=30))
        last = device.entries(f"/v1/turns/{turn.turn_id}/events", turn._last_id, 0)
    assert last.entries == [] and len(chunks) >= 2, "the device heard the reply in chunks"
    events = client.keys.events(turn.turn_id)
    stored = [f for _, f in client.redis.xrange(events) if b"pcm" in f]
    assert len(stored) <= 1, f"{len(stored)} of {len(chunks)} audio chunks still stored"
    assert 0 < client.redis.ttl(events) <= 10, "the read turn expires within the reply TTL"
    case.note(f"{len(chunks)} chunks heard, {len(stored)} kept (the first, for the metrics)")


def test_a_stream_writes_nothing_after_its_turn_ended(gateway, client, reliability_case):
    case = reliability_case("gateway: a stream writing on after its turn ended")
    with gateway.device() as device:
        ws = socket_of(gateway, device)
    pcm = frames(pcm_of("command_time.wav"))
    with ws:
        for frame in pcm[:10]:
            ws.send(frame)
        started = json.loads(ws.recv(timeout=10))
        turn_id = started["turn_id"]
        spec = client.store.spec(turn_id)
        client.store.finish(spec, "error", ("deadline", "ended for the test"))  # as the sweeper
        try:
            for frame in pcm[10:]:
                ws.send(frame)
        except ConnectionClosed:
            pass
        said = refusal(ws)
    assert said.get("code") == "turn-ended", said
    assert not client.redis.exists(client.keys.speech(turn_id)), "the stream was made again"
    case.note("writes after the end refused; the deleted stream is not recreated")


def test_a_stream_has_a_frame_cap_and_a_lifetime(gateway, reliability_case):
    case = reliability_case("gateway: a socket kept open by tiny frames")
    with gateway.device() as device:
        with socket_of(gateway, device) as ws:
            try:
                for _ in range(301):
                    ws.send(b"\0\0")
            except ConnectionClosed:
                pass
            assert refusal(ws).get("code") == "too-many-frames"
        with socket_of(gateway, device) as ws:
            began = time.monotonic()
            said: dict[str, Any] = {}
            while not said and time.monotonic() - began < 30:
                try:
                    ws.send(b"\0\0")  # one every half second: never idle, never large
                    said = json.loads(ws.recv(timeout=0.5))
                    said = said if said.get("type") == "error" else {}
                except TimeoutError:
                    pass
                except ConnectionClosed:
                    said = refusal(ws)
    assert said.get("code") == "too-long", said
    case.note(f"frame cap, and closed after {time.monotonic() - began:.1f} s "
              "(5 s of audio + 1 s grace)")


def test_a_streamed_command_is_capped_in_seconds(gateway, reliability_case):
    case = reliability_case("gateway: 7 s streamed against a 5 s limit (bytes within limit)")
    with gateway.device() as device, pytest.raises(Exception) as refused:
        device.say_frames(iter(frames(pcm_of("long_question.wav", 7.0))))
    assert getattr(refused.value, "code", "") == "too-large", refused.value
    case.refused()


def test_uploaded_speech_is_budgeted_in_seconds(gateway, fake, reliability_case):
    case = reliability_case("gateway: speech uploaded past the device's seconds a minute")
    fake.script_transcripts("what time is it", "what time is it", "what time is it")
    fake.script_chat({"match": "what time", "repeat": True, "content": "Tea time."})
    wav = (SPEECH / "command_time.wav").read_bytes()  # 3.5 s
    with gateway.device() as device:
        codes = [device.http.post("/v1/turns/audio", content=wav,
                                  params={"speak": "false"}).status_code for _ in range(3)]
    assert codes == [201, 201, 429], codes
    case.refused()


# -- M1: a device's session names are its own ---------------------------------------------------
def test_session_names_do_not_collide_across_devices(gateway, fake, reliability_case):
    case = reliability_case("gateway: device kitchen and device kitchen.hall, same session id")
    fake.script_chat({"match": "collide", "repeat": True, "content": "ok"})
    base = name()
    with gateway.device(base) as kitchen, gateway.device(f"{base}.hall") as hall:
        mine = kitchen.ask("collide", session="hall.s", speak=False)
        theirs = hall.ask("collide", session="s", speak=False)
        mine.wait(timeout=30)
        theirs.wait(timeout=30)
    assert mine.session_id != theirs.session_id
    case.note(f"{mine.session_id} vs {theirs.session_id}")


# -- M2: revocation is immediate -------------------------------------------------------------------
def test_a_revoked_devices_long_poll_and_socket_close_at_once(gateway, client,
                                                              reliability_case):
    case = reliability_case("gateway: a revoked device's open long poll and socket")
    who = name()
    with gateway.device(who) as device:
        answers: list[httpx.Response] = []
        poll = threading.Thread(target=lambda: answers.append(device.http.get(
            "/v1/announcements", params={"wait_ms": 10_000}, timeout=20)))
        ws = socket_of(gateway, device)
        with ws:
            for frame in frames(pcm_of("command_time.wav"))[:10]:
                ws.send(frame)
            assert json.loads(ws.recv(timeout=10))["type"] == "turn"
            poll.start()
            time.sleep(0.5)
            DeviceRegistry(client.redis, client.keys).revoke(who)
            revoked_at = time.monotonic()
            said = refusal(ws, timeout=5)
            socket_s = time.monotonic() - revoked_at
            poll.join(20)
    assert said.get("code") == "revoked", said
    assert answers and answers[0].status_code == 401, answers
    case.note(f"socket closed {socket_s:.2f} s after the revocation")


# -- M3: one device's long polls do not starve the others ----------------------------------------
def test_long_polls_are_capped_per_device_and_long_waits_work(gateway, reliability_case):
    case = reliability_case("gateway: long polls of one device, with waits over 5 s")
    with gateway.device() as hog, gateway.device() as other:
        answers: list[httpx.Response] = []

        def long_poll() -> None:
            answers.append(hog.http.get("/v1/announcements", params={"wait_ms": 6000},
                                        timeout=20))

        polls = [threading.Thread(target=long_poll) for _ in range(3)]
        for poll in polls:
            poll.start()
        # Three at once, two allowed: one is refused at once, while the other two are open.
        wait_until(lambda: any(a.status_code == 429 for a in answers),
                   "one of the hog's three long polls to be refused")
        health = httpx.get(f"{gateway.url}/v1/health", timeout=5)
        others = other.http.get("/v1/announcements", params={"wait_ms": 0}, timeout=5)
        for poll in polls:
            poll.join(20)
    refused = [a for a in answers if a.status_code == 429]
    assert len(refused) == 1 and refused[0].json()["code"] == "too-many-connections", answers
    assert health.status_code == 200 and others.status_code == 200
    assert sorted(a.status_code for a in answers) == [200, 200, 429], \
        "a 6 s wait answers, empty (no 5 s read timeout)"
    case.refused()


# -- M4: the gateway's memory -------------------------------------------------------------------
def test_sockets_are_capped_per_device_and_buffered_audio_in_seconds(gateway, reliability_case):
    case = reliability_case("gateway: a device's sockets at 8 kHz, buffered in the gateway")
    with gateway.device() as device, contextlib.ExitStack() as open_now:
        opened = [open_now.enter_context(socket_of(gateway, device, rate=8000))
                  for _ in range(2)]
        third = open_now.enter_context(socket_of(gateway, device, rate=8000))
        assert refusal(third, timeout=5).get("code") == "too-many-connections"
        ws = opened[0]
        try:
            for frame in frames(b"\1\0" * 50_000, 4000):  # 100 kB: over 5 s at 8 kHz
                ws.send(frame)
        except ConnectionClosed:
            pass
        assert refusal(ws, timeout=5).get("code") == "too-large"
        with contextlib.suppress(ConnectionClosed):
            opened[1].send(b"\0" * 100_000)  # one message over the frame limit
        with pytest.raises(ConnectionClosed) as big:
            opened[1].recv(timeout=5)
    assert big.value.rcvd is not None and big.value.rcvd.code == 1009
    case.refused(3)


# -- M6: unauthenticated slowloris, and tokens in clear -------------------------------------------
def test_half_open_requests_are_closed_after_the_header_timeout(gateway, reliability_case):
    case = reliability_case("gateway: 20 connections sending a request head slowly")
    host, port = gateway.url.split("//")[1].split(":")
    slow = [socket.create_connection((host, int(port)), timeout=5) for _ in range(20)]
    for s in slow:
        s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n")
    closed = 0
    for s in slow:  # each read ends when the server closes it (after the head timeout, 1 s)
        s.settimeout(10)  # a deadline for that, not a speed: unclosed, it would stay open
        with contextlib.suppress(TimeoutError):
            closed += s.recv(100) == b""
        s.close()
    assert closed == len(slow), f"{closed} of {len(slow)} closed by the server"
    assert httpx.get(f"{gateway.url}/v1/health", timeout=5).status_code == 200
    case.refused(len(slow))


def test_the_client_refuses_plain_http_to_another_host():
    def client(url: str, **extra: Any) -> GatewayClient:
        return GatewayClient(Settings(gateway=GatewaySettings(
            url=url, device_token=SecretStr("vqd_x"), **extra)))

    with pytest.raises(ValueError, match="VOXQUEUE_GATEWAY_ALLOW_HTTP"):
        client("http://192.0.2.10:8765")
    for url, extra in (("https://192.0.2.10:8765", {}), ("http://127.0.0.1:8765", {}),
                       ("http://192.0.2.10:8765", {"allow_http": True})):
        client(url, **extra).close()


# -- the low findings ------------------------------------------------------------------------------
def test_bad_input_is_4xx_with_a_message_never_5xx(gateway, reliability_case):
    case = reliability_case("gateway: rate=0, deadline nan/negative/inf, on every path")
    wav = (SPEECH / "command_time.wav").read_bytes()
    with gateway.device() as device:
        answers = [device.http.post("/v1/turns/audio", content=b"\0" * 3200,
                                    params={"rate": "0"}),
                   *(device.http.post("/v1/turns/audio", content=wav, params={"deadline_s": d})
                     for d in ("nan", "-5", "inf")),
                   device.http.post("/v1/turns", content=b'{"text": "hi", "deadline_s": NaN}',
                                    headers={"content-type": "application/json"})]
        with socket_of(gateway, device, deadline_s="-1") as ws:
            with contextlib.suppress(ConnectionClosed):  # (refused before the audio, at times)
                ws.send(b"\0" * 640)
            streamed = refusal(ws)  # (the refusal sent before the close is still read)
    for answer in answers:
        assert 400 <= answer.status_code < 500, (answer.status_code, answer.text)
        assert answer.json()["message"], answer.text
    assert streamed.get("code") == "invalid-input", streamed
    case.refused(len(answers) + 1)


def test_cancels_are_rate_limited(gateway, fake, reliability_case):
    case = reliability_case("gateway: cancels past the device's turns a minute")
    fake.inject("chat", delay=3.0)
    with gateway.device() as device:
        turn = device.ask("a slow one", speak=False)
        codes = [device.http.post(f"/v1/turns/{turn.turn_id}/cancel").status_code
                 for _ in range(20)]
    assert codes[:19] == [202] * 19 and codes[19] == 429, codes
    case.refused()


def test_revoke_by_the_command_line_takes_open_connections_too(gateway, reliability_case):
    """The operator's way: ``voxqueue devices revoke`` (a long poll open meanwhile)."""
    case = reliability_case("gateway: voxqueue devices revoke with a long poll open")
    who = name()
    with gateway.device(who) as device:
        answers: list[httpx.Response] = []
        poll = threading.Thread(target=lambda: answers.append(device.http.get(
            "/v1/announcements", params={"wait_ms": 10_000}, timeout=20)))
        poll.start()
        subprocess.run([*VOXQUEUE, "devices", "revoke", who], env=gateway.env, cwd=ROOT,
                       check=True, capture_output=True, timeout=30)
        poll.join(20)
    assert answers and answers[0].status_code == 401
    case.refused()
