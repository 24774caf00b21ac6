"""The fake provider server, driven through the official OpenAI and ElevenLabs SDKs."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import elevenlabs
import httpx
import openai
import pytest

from testkit.fakes import FakeProviders, FakeProvidersClient, spawn

ROOT = Path(__file__).resolve().parents[2]
WAV = ROOT / "tests" / "fixtures" / "speech" / "command_time.wav"
USER = [{"role": "user", "content": "What time is it?"}]


_open_clients: list = []


@pytest.fixture(autouse=True)
def _close_clients():
    yield
    while _open_clients:
        _open_clients.pop().close()


@pytest.fixture
def fake():
    with FakeProviders() as server:
        yield server


def oai(fake, max_retries: int = 0, **kw) -> openai.OpenAI:
    client = openai.OpenAI(
        api_key=kw.pop("api_key", "sk-test"),
        base_url=fake.openai_base_url,
        max_retries=max_retries,
        timeout=10,
        **kw,
    )
    _open_clients.append(client)
    return client


def eleven(fake) -> elevenlabs.ElevenLabs:
    http = httpx.Client(timeout=10)
    _open_clients.append(http)
    return elevenlabs.ElevenLabs(
        api_key="el-test", base_url=fake.elevenlabs_base_url, httpx_client=http
    )


def transcribe(client: openai.OpenAI, data: bytes, **kw):
    return client.audio.transcriptions.create(
        file=("clip.wav", data, "audio/wav"), model="whisper-1", **kw
    )


def chat(client: openai.OpenAI, messages=USER, **kw):
    return client.chat.completions.create(model="gpt-4o-mini", messages=messages, **kw)


def reassemble(stream) -> tuple[str, dict[int, dict], list, str | None]:
    """Accumulate streamed deltas by tool-call index, like a worker would."""
    text, calls, order, usage, finish = "", {}, [], None, None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            finish = choice.finish_reason or finish
            text += choice.delta.content or ""
            for tc in choice.delta.tool_calls or []:
                call = calls.setdefault(tc.index, {"id": None, "name": "", "arguments": ""})
                call["id"] = tc.id or call["id"]
                if tc.function and tc.function.name:
                    call["name"] = tc.function.name
                if tc.function and tc.function.arguments:
                    call["arguments"] += tc.function.arguments
                    order.append(tc.index)
    return text, calls, [order, usage], finish


# --------------------------------------------------------------------------- transcriptions


def test_transcription_returns_scripted_text_then_default(fake):
    client = oai(fake)
    data = WAV.read_bytes()
    fake.script_transcripts("set a timer")
    result = transcribe(client, data, language="en")
    assert result.text == "set a timer"
    assert result.usage.type == "duration" and result.usage.seconds > 0
    assert transcribe(client, data).text == "what time is it"  # FIFO empty -> default
    assert transcribe(client, data, response_format="text") == "what time is it"
    rec = fake.requests[0]
    assert rec["route"] == "transcriptions"
    assert rec["form"] == {"model": "whisper-1", "language": "en"}
    assert rec["file_size"] == len(data) and rec["auth_present"] is True
    assert "sk-test" not in json.dumps(fake.requests)
    assert fake.seen_keys == {"sk-test"}


def test_transcription_match_sha256(fake):
    client = oai(fake)
    data = WAV.read_bytes()
    other = data[:44] + bytes(3200)
    fake.script_transcripts({"match_sha256": hashlib.sha256(data).hexdigest(), "text": "mine"})
    assert transcribe(client, other).text == "what time is it"  # does not apply, stays queued
    assert transcribe(client, data).text == "mine"
    assert transcribe(client, data).text == "what time is it"


@pytest.mark.parametrize("payload", [b"", b"ID3\x03 not a wav file at all"])
def test_transcription_rejects_non_wav(fake, payload):
    with pytest.raises(openai.BadRequestError):
        transcribe(oai(fake), payload)


# --------------------------------------------------------------------------- chat


def test_chat_tool_calls_non_streaming(fake):
    fake.script_chat(
        {
            "tool_calls": [
                {"name": "get_current_time", "arguments": {"timezone": "UTC"}},
                {"name": "broken", "arguments": '{"x": ', "id": "call_fixed"},
            ]
        }
    )
    resp = chat(oai(fake), tools=[])
    choice = resp.choices[0]
    assert choice.finish_reason == "tool_calls"
    first, second = choice.message.tool_calls
    assert first.id.startswith("call_") and first.type == "function"
    assert first.function.name == "get_current_time"
    assert json.loads(first.function.arguments) == {"timezone": "UTC"}
    assert (second.id, second.function.arguments) == ("call_fixed", '{"x": ')
    assert resp.usage.prompt_tokens > 0 and resp.usage.total_tokens > resp.usage.prompt_tokens
    assert fake.chat_requests()[0]["messages"] == USER


def test_chat_streaming_two_tool_calls_interleaved_with_usage(fake):
    args_a = {"timezone": "Asia/Tokyo"}
    args_b = {"city": "Paris", "units": "metric"}
    fake.script_chat(
        {
            "tool_calls": [
                {"name": "get_current_time", "arguments": args_a},
                {"name": "get_weather", "arguments": args_b},
            ]
        }
    )
    stream = chat(oai(fake), stream=True, stream_options={"include_usage": True})
    text, calls, (order, usage), finish = reassemble(stream)
    assert text == "" and finish == "tool_calls"
    assert [calls[0]["name"], calls[1]["name"]] == ["get_current_time", "get_weather"]
    assert json.loads(calls[0]["arguments"]) == args_a
    assert json.loads(calls[1]["arguments"]) == args_b
    assert calls[0]["id"] != calls[1]["id"]
    assert order[:4] == [0, 1, 0, 1]  # fragments interleave by index
    assert usage is not None and usage.completion_tokens == len(order)


def test_chat_streaming_content_in_words(fake):
    fake.script_chat({"content": "It is noon in Tokyo."})
    stream = chat(oai(fake), stream=True)
    pieces = [
        c.choices[0].delta.content for c in stream if c.choices and c.choices[0].delta.content
    ]
    assert "".join(pieces) == "It is noon in Tokyo." and len(pieces) == 5


def test_chat_match_after_tool_repeat_and_default(fake):
    client = oai(fake)
    fake.script_chat(
        {"content": "weather answer", "match": "WEATHER"},
        {"content": "after tool", "after_tool": True},
        {"content": "always", "match": "ping", "repeat": True},
    )
    ask = [{"role": "user", "content": "hello"}]
    assert chat(client, ask).choices[0].message.content == "You said: hello"
    weather = [{"role": "user", "content": [{"type": "text", "text": "The weather in Paris?"}]}]
    assert chat(client, weather).choices[0].message.content == "weather answer"
    assert chat(client, weather).choices[0].message.content == "You said: The weather in Paris?"
    tool_turn = [
        *USER,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "a", "arguments": "{}"}},
                {"id": "c2", "type": "function", "function": {"name": "b", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "12:00"},
        {"role": "tool", "tool_call_id": "c2", "content": "sunny"},
    ]
    assert chat(client, tool_turn).choices[0].message.content == "after tool"
    assert chat(client, tool_turn).choices[0].message.content == "Done: 12:00; sunny"
    for _ in range(2):
        assert chat(client, [{"role": "user", "content": "ping"}]).choices[0].message.content == (
            "always"
        )


def test_missing_key_is_401(fake):
    client = oai(fake, default_headers={"Authorization": ""})
    with pytest.raises(openai.AuthenticationError):
        chat(client)
    assert fake.requests[0]["auth_present"] is False and fake.seen_keys == set()
    req = urllib.request.Request(
        fake.url + "/v1/text-to-speech/v1/stream?output_format=pcm_16000",
        data=json.dumps({"text": "hi", "model_id": "m"}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req, timeout=5)
    assert err.value.code == 401
    err.value.close()


# --------------------------------------------------------------------------- ElevenLabs


def test_elevenlabs_stream_pcm(fake):
    text = "Hello from the fake."
    audio = b"".join(
        eleven(fake).text_to_speech.stream(
            "voice1", text=text, model_id="eleven_flash_v2_5", output_format="pcm_16000"
        )
    )
    assert len(audio) % 2 == 0 and len(audio) == int(0.06 * len(text) * 16000) * 2
    assert any(audio)
    rec = fake.requests[0]
    assert rec["route"] == "tts" and rec["query"]["output_format"] == "pcm_16000"
    assert rec["json"]["text"] == text and fake.seen_keys == {"el-test"}


def test_elevenlabs_convert_short_text_and_errors(fake):
    tts = eleven(fake).text_to_speech
    audio = b"".join(tts.convert("v", text="Hi", model_id="m", output_format="pcm_24000"))
    assert len(audio) == int(0.2 * 24000) * 2  # 200 ms minimum
    with pytest.raises(elevenlabs.errors.UnprocessableEntityError):
        b"".join(tts.convert("v", text="Hi", model_id="m", output_format="mp3_44100_128"))
    with pytest.raises(elevenlabs.errors.UnprocessableEntityError):
        b"".join(tts.stream("v", text="", model_id="m", output_format="pcm_16000"))


# --------------------------------------------------------------------------- faults


def test_429_with_retry_after_ms_is_retried_by_sdk(fake):
    fake.inject("chat", status=429, headers={"retry-after-ms": "50"})
    resp = chat(oai(fake, max_retries=2))
    assert resp.choices[0].message.content == "You said: What time is it?"
    reqs = fake.requests_for("chat")
    assert len(reqs) == 2 and [r["status"] for r in reqs] == [429, 200]
    assert [r["retry_count"] for r in reqs] == ["0", "1"]


def test_status_fault_times(fake):
    client = oai(fake)
    fake.inject("transcriptions", status=500, times=2)
    for _ in range(2):
        with pytest.raises(openai.InternalServerError):
            transcribe(client, WAV.read_bytes())
    assert transcribe(client, WAV.read_bytes()).text == "what time is it"


def test_reset_and_stream_cut_raise_connection_errors(fake):
    client = oai(fake)
    fake.inject("chat", reset=True)
    with pytest.raises(openai.APIConnectionError):
        chat(client)
    fake.inject("chat", cut_after_chunks=2)
    fake.script_chat({"tool_calls": [{"name": "get_current_time", "arguments": {"tz": "UTC"}}]})
    with pytest.raises(openai.APIConnectionError):
        reassemble(chat(client, stream=True))
    fake.inject("tts", cut_after_chunks=1)
    with pytest.raises(Exception, match=r"incomplete|closed|disconnect"):
        b"".join(eleven(fake).text_to_speech.stream("v", text="x" * 20, output_format="pcm_16000"))
    assert chat(client).choices[0].message.content.startswith("You said")
    assert [r["status"] for r in fake.requests_for("chat")] == ["aborted", "aborted", 200]


# --------------------------------------------------------------------------- latency


def test_latency_profile_delays(fake):
    fake.set_profile(stt_delay_s=0.2, llm_ttft_s=0.2, llm_tokens_per_s=50, tts_ttfb_s=0.2)
    client = oai(fake)
    t0 = time.monotonic()
    transcribe(client, WAV.read_bytes())
    assert time.monotonic() - t0 >= 0.2

    fake.script_chat({"content": "one two three four five six seven eight nine ten"})
    t0 = time.monotonic()
    stream = chat(client, stream=True)
    first = next(iter(stream))
    ttft = time.monotonic() - t0
    list(stream)
    assert first.choices[0].delta.role == "assistant"
    assert ttft >= 0.2 and time.monotonic() - t0 >= 0.2 + 10 / 50

    t0 = time.monotonic()
    chat(client)  # non-streaming: ttft + tokens / tps
    assert time.monotonic() - t0 >= 0.2 + 3 / 50

    fake.set_profile(tts_rtf=0.5)
    t0 = time.monotonic()
    audio = eleven(fake).text_to_speech.stream("v", text="x" * 10, output_format="pcm_16000")
    next(iter(audio))
    assert time.monotonic() - t0 >= 0.2
    b"".join(audio)
    assert time.monotonic() - t0 >= 0.2 + 0.5 * 0.5  # 600 ms of audio, first 100 ms free


def test_streamed_usage_comes_with_the_stop_not_a_token_later(fake):
    fake.set_profile(llm_tokens_per_s=2)  # a token every 500 ms
    fake.script_chat({"content": "one two"})
    stream = chat(oai(fake), stream=True, stream_options={"include_usage": True})
    arrived = [(chunk, time.monotonic()) for chunk in stream]
    (stop, stop_at), (usage, usage_at) = arrived[-2:]
    assert stop.choices[0].finish_reason == "stop" and usage.usage is not None
    assert stop_at - arrived[-3][1] >= 0.4  # the stop token takes a token's time
    assert usage_at - stop_at < 0.25


def test_concurrent_requests_overlap(fake):
    fake.set_profile(llm_ttft_s=0.3)
    client = oai(fake)
    threads = [threading.Thread(target=chat, args=(client,)) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert fake.max_concurrency["chat"] >= 2
    assert len(fake.chat_requests()) == 3


def test_reset_clears_everything(fake):
    fake.script_chat({"content": "scripted"})
    fake.inject("chat", status=500)
    fake.set_profile(llm_ttft_s=5)
    fake.reset()
    assert chat(oai(fake)).choices[0].message.content.startswith("You said")
    assert len(fake.requests) == 1 and fake.profile["llm_ttft_s"] == 0


# --------------------------------------------------------------------------- out of process


def test_subprocess_server_with_admin_routes():
    proc = subprocess.Popen(
        [sys.executable, "-m", "testkit.fakes.provider_server", "--port", "0"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline().strip()
        assert line.startswith("READY http://127.0.0.1:")
        url = line.split()[1]
        remote = FakeProvidersClient(url)

        def post(route: str, body) -> dict:
            req = urllib.request.Request(
                f"{url}/_fake/{route}",
                data=json.dumps(body).encode(),
                headers={"Content-Type": "application/json"},
            )
            with urllib.request.urlopen(req, timeout=5) as resp:
                return json.loads(resp.read())

        assert post("chat", {"content": "from admin", "match": "time"}) == {"ok": True}
        post("faults", {"route": "chat", "status": 503, "headers": {"retry-after-ms": "10"}})
        post("profile", {"llm_ttft_s": 0.05})
        client = oai(remote, max_retries=1, api_key="sk-sub")
        assert chat(client).choices[0].message.content == "from admin"
        state = remote.state()
        assert [r["status"] for r in state["requests"]] == [503, 200]
        assert state["seen_keys"] == ["sk-sub"] and state["profile"]["llm_ttft_s"] == 0.05
        assert remote.chat_requests()[0]["model"] == "gpt-4o-mini"
        remote.script_transcripts("remote transcript")
        assert transcribe(client, WAV.read_bytes()).text == "remote transcript"
        remote.reset()
        assert remote.requests == []
        with pytest.raises(urllib.error.HTTPError) as err:
            post("faults", {"route": "nope", "status": 500})
        assert err.value.code == 400
        err.value.close()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        proc.stdout.close()


def test_spawn_helper_with_cli_profile():
    proc, remote = spawn(profile={"stt_delay_s": 0.1}, cwd=str(ROOT))
    try:
        assert remote.state()["profile"]["stt_delay_s"] == 0.1
        transcribe(oai(remote), WAV.read_bytes())
        assert remote.wait_for_requests("transcriptions", 1, timeout=5)[0]["status"] == 200
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        proc.stdout.close()


def test_elevenlabs_with_timestamps_is_json_lines_of_the_same_pcm(fake):
    """Pipecat's ElevenLabsHttpTTSService route: a JSON line per chunk, the audio base64, the
    same PCM as ``/stream``; each chunk's writing time recorded."""
    import base64

    text = "Hello from the fake."
    body = {"text": text, "model_id": "eleven_flash_v2_5"}
    headers = {"xi-api-key": "el-test"}
    url = f"{fake.url}/v1/text-to-speech/voice1/stream"
    with httpx.Client(timeout=10) as client:
        raw = client.post(url, params={"output_format": "pcm_16000"}, json=body,
                          headers=headers).content
        lines = client.post(url + "/with-timestamps", params={"output_format": "pcm_16000"},
                            json=body, headers=headers).text.splitlines()
    chunks = [json.loads(line) for line in lines]
    assert all(c["alignment"] is None and c["normalized_alignment"] is None for c in chunks)
    assert b"".join(base64.b64decode(c["audio_base64"]) for c in chunks) == raw
    stamped = fake.requests[1]
    assert stamped["path"].endswith("/stream/with-timestamps")
    assert len(stamped["sent_ts"]) == len(chunks) > 1
    assert stamped["ts"] <= stamped["sent_ts"][0] <= stamped["sent_ts"][-1]


def test_a_streamed_chat_records_when_each_event_was_written(fake):
    fake.set_profile(llm_tokens_per_s=100.0)
    fake.script_chat({"content": "one two three"})
    list(chat(oai(fake), stream=True))
    record = fake.requests[0]
    sent = record["sent_ts"]
    assert len(sent) == 5  # the role, three words, the stop
    assert sent == sorted(sent)
    # Paced on a schedule from the request (a token each 10 ms): each word is written no
    # sooner than its place in it, however late the ones before it were (a bound, not a speed).
    ttft = fake.profile["llm_ttft_s"]
    assert all(at - record["ts"] >= ttft + 0.01 * i - 0.002
               for i, at in enumerate(sent[1:4], start=1)), (record["ts"], sent)
