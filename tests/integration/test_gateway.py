"""The device gateway, as devices and attackers meet it: ``voxqueue gateway`` (uvicorn) in its
own process in front of real workers, devices with their own tokens from ``voxqueue devices
add``, and no Redis for any device."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from pydantic import SecretStr

from testkit.clock import wait_until
from tests.conftest import ROOT, SPEECH, free_port
from voxqueue.client.direct import InputError, Unavailable
from voxqueue.client.gateway import GatewayClient
from voxqueue.gateway.rules import session_of
from voxqueue.settings import GatewaySettings, RedisSettings, Settings

pytestmark = pytest.mark.integration
VOXQUEUE = [sys.executable, "-m", "voxqueue.cli"]
TURNS_PER_MINUTE = 12
MAX_AUDIO_BYTES = 400_000


@dataclass
class Gateway:
    url: str
    env: dict[str, str]
    log: Path
    ca_file: Path | None = None  # what a device trusts for the gateway's certificate

    def add(self, name: str) -> str:
        """``voxqueue devices add NAME``: the token it prints."""
        done = subprocess.run([*VOXQUEUE, "devices", "add", name], env=self.env, cwd=ROOT,
                              capture_output=True, text=True, timeout=30, check=True)
        return done.stdout.strip()

    def run_edge(self, name: str, out: Path) -> subprocess.CompletedProcess[str]:
        """``voxqueue edge`` as device ``name`` (its own token, Redis out of its reach) on two
        spoken commands, its replies written to ``out``."""
        env = {**self.env, "VOXQUEUE_GATEWAY_URL": self.url,
               "VOXQUEUE_DEVICE_TOKEN": self.add(name), "VOXQUEUE_EDGE_DEVICE": name,
               "VOXQUEUE_REDIS_URL": "redis://127.0.0.1:1/0",
               **({"VOXQUEUE_GATEWAY_CA_FILE": str(self.ca_file)} if self.ca_file else {})}
        return subprocess.run(
            [*VOXQUEUE, "edge", "--wav", str(SPEECH / "edge_two_turns.wav"), "--audio-out",
             str(out), "-w", "hey_jarvis", "-w", "okay_nabu"],
            env=env, cwd=ROOT, capture_output=True, text=True, timeout=90)

    def device(self, name: str | None = None) -> GatewayClient:
        """A new device's client: its own name and token; Redis out of reach."""
        token = self.add(name or f"dev-{uuid.uuid4().hex[:8]}")
        return GatewayClient(Settings(
            gateway=GatewaySettings(url=self.url, device_token=SecretStr(token),
                                    ca_file=self.ca_file),
            redis=RedisSettings(url="redis://127.0.0.1:1/0")))


@contextlib.contextmanager
def running_gateway(system, log_dir: Path, *tls: str, **settings: str) -> Iterator[Gateway]:
    """``voxqueue gateway`` in its own process (``tls``: its --certfile/--keyfile options;
    ``settings``: more of its environment)."""
    port = free_port()
    env = {**system.env, "VOXQUEUE_GATEWAY_TURNS_PER_MINUTE": str(TURNS_PER_MINUTE),
           "VOXQUEUE_MAX_AUDIO_BYTES": str(MAX_AUDIO_BYTES), "VOXQUEUE_MAX_DEADLINE_S": "120",
           **settings}
    log_path = log_dir / "gateway.log"
    log = log_path.open("wb")
    proc = subprocess.Popen([*VOXQUEUE, "gateway", "--port", str(port), *tls], env=env,
                            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    url = f"{'https' if tls else 'http'}://127.0.0.1:{port}"
    give_up = time.time() + 30
    while True:
        try:
            if httpx.get(f"{url}/v1/health", timeout=1, verify=False).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        assert proc.poll() is None and time.time() < give_up, "the gateway did not start"
        time.sleep(0.2)
    try:
        yield Gateway(url, env, log_path)
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()


@pytest.fixture(scope="module")
def gateway(system, tmp_path_factory) -> Iterator[Gateway]:
    with running_gateway(system, tmp_path_factory.mktemp("gateway")) as running:
        yield running


# -- what a device does ---------------------------------------------------------------------------
def test_a_device_asks_and_hears_through_the_gateway(gateway, fake):
    fake.script_chat({"match": "through the gateway", "content": "Loud and clear."})
    with gateway.device("kitchen-speaker") as kitchen:
        turn = kitchen.ask("can you hear me through the gateway", session="morning")
        audio = b"".join(turn.playback(timeout=30))
        result = turn.result()
    assert result.status == "ok" and result.reply == "Loud and clear."
    assert len(audio) > 3200
    assert turn.session_id == session_of("kitchen-speaker", "morning")


def test_a_spoken_turn_through_the_gateway(gateway, fake):
    fake.script_transcripts("what time is it")
    fake.script_chat({"match": "what time", "content": "Time for tea."})
    with gateway.device() as device:
        result = device.say(SPEECH / "command_time.wav").wait(timeout=30)
    assert result.status == "ok", result.error
    assert result.transcript == "what time is it" and result.reply == "Time for tea."


def seen(device: GatewayClient, turn_id: str, kind: str) -> bool:
    """Whether the turn's events, read through the gateway, hold one of ``kind``."""
    got = device.entries(f"/v1/turns/{turn_id}/events", None, 0)
    return any(e.event.get("type") == kind for e in got.entries)


def test_cancel_through_the_gateway(gateway, fake):
    fake.inject("chat", delay=3.0)
    with gateway.device() as device:
        turn = device.ask("a slow one")
        wait_until(lambda: seen(device, turn.turn_id, "llm-start"), "the model's call")
        turn.cancel()  # during the model's (3 s) call
        assert turn.wait(timeout=20).status == "cancelled"


def test_announcements_reach_their_device_only(gateway, client):
    with gateway.device("hall") as hall, gateway.device("porch") as porch:
        hall_start = hall.entries("/v1/announcements", None, 0).last_id
        porch_start = porch.entries("/v1/announcements", None, 0).last_id
        client.redis.xadd(client.keys.announcements("hall"), {
            "e": '{"v": 1, "type": "announcement", "kind": "timer", "text": "Tea is ready."}'})
        got = hall.entries("/v1/announcements", hall_start, 2000)
        assert [e.event["text"] for e in got.entries] == ["Tea is ready."]
        assert porch.entries("/v1/announcements", porch_start, 500).entries == []


# -- limits are the server's ----------------------------------------------------------------------
def test_limits_are_enforced_by_the_gateway(gateway):
    with gateway.device() as device:
        with pytest.raises(InputError) as too_long:
            device.ask("x" * 5000)
        assert too_long.value.code == "text-too-long"
        with pytest.raises(InputError) as far:
            device.ask("hello", deadline_s=32 * 365 * 24 * 3600)
        assert far.value.code == "invalid-input" and "ceiling" in str(far.value)
        with pytest.raises(InputError) as big:
            device.say(SPEECH / "long_question.wav")  # 20 s: over the gateway's 400 kB
        assert big.value.code == "too-large"
        with pytest.raises(InputError) as junk:
            device.say(b"not a wav file at all")
        assert junk.value.code == "audio-invalid"


def test_a_device_is_rate_limited_with_retry_after(gateway, fake):
    fake.script_chat({"match": "burst", "repeat": True, "content": "ok"})
    with gateway.device() as device:
        for _ in range(TURNS_PER_MINUTE):
            device.ask("burst", speak=False)
        answer = device.http.post("/v1/turns", json={"text": "burst", "speak": False})
    assert answer.status_code == 429
    assert answer.json()["code"] == "rate-limited"
    assert 1 <= int(answer.headers["Retry-After"]) <= 61


# -- an attacker with a device, or with no token ------------------------------------------------
def test_no_token_a_bad_token_and_a_revoked_token_are_refused(gateway):
    anonymous = httpx.post(f"{gateway.url}/v1/turns", json={"text": "hi"})
    assert anonymous.status_code == 401
    forged = httpx.post(f"{gateway.url}/v1/turns", json={"text": "hi"},
                        headers={"Authorization": "Bearer vqd_" + "A" * 43})
    assert forged.status_code == 401
    with gateway.device("to-revoke") as device:
        assert device.http.get("/v1/announcements").status_code == 200
        subprocess.run([*VOXQUEUE, "devices", "revoke", "to-revoke"], env=gateway.env, cwd=ROOT,
                       check=True, capture_output=True, timeout=30)
        assert device.http.get("/v1/announcements").status_code == 401
    listed = subprocess.run([*VOXQUEUE, "devices"], env=gateway.env, cwd=ROOT, text=True,
                            check=True, capture_output=True, timeout=30).stdout
    assert "kitchen-speaker" in listed and "to-revoke" not in listed
    assert "vqd_" not in listed, "tokens are never shown again"


def test_a_device_cannot_read_or_cancel_another_devices_turn(gateway, fake):
    fake.inject("chat", delay=2.0)
    with gateway.device("victim") as victim, gateway.device("thief") as thief:
        turn = victim.ask("my secret question", session="private")
        events = thief.http.get(f"/v1/turns/{turn.turn_id}/events")
        cancel = thief.http.post(f"/v1/turns/{turn.turn_id}/cancel")
        assert events.status_code == 404 and cancel.status_code == 404
        assert turn.wait(timeout=30).status == "ok", "the victim's turn went on"


def test_sessions_are_per_device_even_with_the_same_name(gateway, fake, client):
    fake.script_chat({"match": "remember", "repeat": True, "content": "Noted."})
    with gateway.device("alice") as alice, gateway.device("bob") as bob:
        alice.ask("remember my code is 4711", session="shared", speak=False).wait(timeout=30)
        bob_turn = bob.ask("remember nothing", session="shared", speak=False)
        bob_turn.wait(timeout=30)
    alice_history = client.redis.lrange(client.keys.messages(session_of("alice", "shared")), 0, -1)
    bob_history = client.redis.lrange(client.keys.messages(bob_turn.session_id), 0, -1)
    assert any(b"4711" in m for m in alice_history)
    assert not any(b"4711" in m for m in bob_history)
    assert client.store.spec(bob_turn.turn_id).device == "bob"


def test_the_edge_runs_through_the_gateway_with_no_redis(gateway, fake, tmp_path):
    """``voxqueue edge`` with a gateway URL and its token, Redis out of its reach."""
    fake.script_transcripts("What time is it in Tokyo?", "Set a timer for five minutes.")
    out = tmp_path / "replies"
    proc = gateway.run_edge("edge-box", out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("run-end ok") == 2, proc.stdout
    assert len(sorted(out.glob("*-turn-*.wav"))) == 2
    assert "Cannot reach the server" not in proc.stdout + proc.stderr, "it never needed Redis"


def test_a_device_cannot_recall_another_devices_memory(gateway, fake):
    fake.script_chat(
        {"match": "remember", "tool_calls": [
            {"name": "remember", "arguments": {"fact": "the safe code is 4711"}}]},
        {"match": "what do you remember", "tool_calls": [
            {"name": "recall", "arguments": {"query": "safe code"}}]},
        {"after_tool": True, "repeat": True, "content": "Done."},
    )
    with gateway.device("owner-box") as owner, gateway.device("snoop-box") as snoop:
        assert owner.ask("remember the safe code is 4711", speak=False).wait(
            timeout=30).status == "ok"
        result = snoop.ask("what do you remember about the safe code", speak=False).wait(
            timeout=30)
    (call,) = result.tool_calls
    assert call.name == "recall" and "4711" not in (call.result or "") + (call.error or "")


# -- streamed capture over a WebSocket -----------------------------------------------------------
def frames_of(name: str, ms: int = 20) -> list[bytes]:
    import wave

    with wave.open(str(SPEECH / name)) as w:
        pcm = w.readframes(w.getnframes())
    step = 16 * ms * 2
    return [pcm[i:i + step] for i in range(0, len(pcm), step)]


def test_a_device_streams_its_capture_frame_by_frame(gateway, fake):
    fake.script_transcripts("what time is it")
    fake.script_chat({"match": "what time", "content": "Streamed and answered."})
    with gateway.device() as device:
        turn = device.say_frames(iter(frames_of("command_time.wav")), session="streamed")
        result = turn.wait(timeout=30)
    assert result.status == "ok", result.error
    assert result.transcript == "what time is it" and result.reply == "Streamed and answered."
    (session,) = fake.requests_for("realtime")  # streamed through to a Realtime session
    assert session["audio_bytes"] > 48000 * 2, "the utterance reached the STT as it came"


def test_a_streamed_capture_over_the_limit_or_unauthenticated_is_refused(gateway):
    import websockets.sync.client as wsc
    from websockets.exceptions import InvalidStatus

    with gateway.device() as device:
        with pytest.raises(InputError) as big:
            device.say_frames(iter(frames_of("long_question.wav")))  # over 400 kB
        assert big.value.code == "too-large"
    url = gateway.url.replace("http", "ws", 1) + "/v1/turns/stream"
    with pytest.raises(InvalidStatus) as refused:
        wsc.connect(url, open_timeout=5)
    assert refused.value.response.status_code == 403


def test_streamed_capture_starts_the_turn_with_the_speech_and_a_vanished_device_cancels_it(
        gateway, client):
    import json

    import websockets.sync.client as wsc

    with gateway.device("streamer") as device:
        token = device.http.headers["Authorization"]
    url = gateway.url.replace("http", "ws", 1) + "/v1/turns/stream?session=live"
    frames = frames_of("command_time.wav")
    with wsc.connect(url, additional_headers={"Authorization": token}, open_timeout=5) as ws:
        for frame in frames[:10]:
            ws.send(frame)
        started = json.loads(ws.recv(timeout=10))  # before the utterance has ended
        assert started["type"] == "turn"
        turn = client.turn(started["turn_id"])
        give_up = time.time() + 10
        while "stt-start" not in [e.event.type for e in client.store.history(turn.turn_id)]:
            assert time.time() < give_up, "speech to text did not start with the speech"
            time.sleep(0.05)
    # the device vanished mid-utterance: its turn is cancelled, its stream gone
    result = turn.wait(timeout=30)
    assert result.status == "cancelled"
    assert not client.redis.exists(client.keys.speech(turn.turn_id))


def test_no_device_token_in_the_gateways_log(gateway):
    """Last in this module: every request above was logged by now."""
    with gateway.device() as device:
        token = device.http.headers["Authorization"].split()[1]
        device.http.get("/v1/announcements")
    logged = gateway.log.read_text(errors="replace")
    assert "GET /v1/announcements" in logged, "the gateway logs its requests"
    assert token not in logged and "vqd_" not in logged


# -- over TLS, as a gateway on a network is run ----------------------------------------------------
@pytest.fixture(scope="module")
def tls_gateway(system, tmp_path_factory) -> Iterator[Gateway]:
    """``voxqueue gateway --certfile --keyfile`` with a certificate from a private CA (TLS 1.3,
    session tickets on: uvicorn's defaults); devices trust the CA by
    ``VOXQUEUE_GATEWAY_CA_FILE``."""
    import trustme

    where = tmp_path_factory.mktemp("tls-gateway")
    ca = trustme.CA()
    issued = ca.issue_cert("127.0.0.1")
    issued.cert_chain_pems[0].write_to_path(str(where / "cert.pem"))
    issued.private_key_pem.write_to_path(str(where / "key.pem"))
    ca.cert_pem.write_to_path(str(where / "ca.pem"))
    with running_gateway(system, where, "--certfile", str(where / "cert.pem"),
                         "--keyfile", str(where / "key.pem")) as running:
        running.ca_file = where / "ca.pem"
        yield running


def test_a_device_streams_asks_and_hears_over_tls(tls_gateway, fake):
    fake.script_transcripts("what time is it")
    fake.script_chat({"match": "what time", "content": "Time for tea, securely."},
                     {"match": "are you there", "content": "Over TLS."})
    with tls_gateway.device("tls-box") as device:
        assert device.tls is not None
        streamed = device.say_frames(iter(frames_of("command_time.wav"))).wait(timeout=30)
        asked = device.ask("are you there")
        audio = b"".join(asked.playback(timeout=30))
    assert streamed.status == "ok", streamed.error
    assert streamed.reply == "Time for tea, securely."
    assert asked.result().reply == "Over TLS." and len(audio) > 3200


def test_a_device_that_does_not_trust_the_gateways_certificate_is_told_so(tls_gateway):
    token = tls_gateway.add("untrusting-box")
    device = GatewayClient(Settings(
        gateway=GatewaySettings(url=tls_gateway.url, device_token=token),
        redis=RedisSettings(url="redis://127.0.0.1:1/0")))
    with device, pytest.raises(Unavailable) as refused:
        device.ask("hello")
    assert "CERTIFICATE_VERIFY_FAILED" in str(refused.value)
    with pytest.raises(Unavailable) as streamed:
        device.say_frames(iter(frames_of("command_time.wav")))
    assert "CERTIFICATE_VERIFY_FAILED" in str(streamed.value)


def test_the_edge_streams_its_capture_through_a_tls_gateway(tls_gateway, fake, tmp_path):
    """``voxqueue edge`` against ``https://``: its commands stream over ``wss://`` as they are
    spoken (websockets' threaded client, its TLS session serialized) and the replies come back
    over HTTPS."""
    fake.script_transcripts("What time is it in Tokyo?", "Set a timer for five minutes.")
    out = tmp_path / "replies"
    proc = tls_gateway.run_edge("tls-edge", out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("run-end ok") == 2, proc.stdout
    assert len(sorted(out.glob("*-turn-*.wav"))) == 2
    logged = tls_gateway.log.read_text(errors="replace")
    assert logged.count("/v1/turns/stream") >= 2, "each command was streamed over wss"
