"""Provider faults injected by the fake providers: every turn ends well or apologizes, in time.

A turn hit by a fault either ends ``ok`` (the call was retried) or ends with an ``error`` event
carrying a code and, when it speaks, a short spoken apology; never after its deadline.
"""

from __future__ import annotations

import itertools

import pytest

from testkit.clock import wait_until
from testkit.waiting import tasks_of_turn
from tests.conftest import SPEECH, system_env
from tests.reliability.conftest import db_url, running_system
from tests.reliability.ledger import audit

pytestmark = pytest.mark.integration

AUDIO = SPEECH / "command_time.wav"


@pytest.fixture(scope="module")
def strict(redis_server, fake_providers, tmp_path_factory):
    """A system with a 1 s provider timeout and slower, longer backoff (6 attempts, 0.2-0.8 s)."""
    env = system_env(
        db_url(redis_server.url, 11),
        fake_providers,
        VOXQUEUE_PROVIDER_TIMEOUT_S="1",
        VOXQUEUE_PROVIDER_BACKOFF_S="0.2",
        VOXQUEUE_PROVIDER_BACKOFF_MAX_S="0.8",
        VOXQUEUE_PROVIDER_MAX_ATTEMPTS="6",
    )
    with running_system(env, tmp_path_factory.mktemp("strict-logs")) as system:
        yield system


def statuses(fake, route: str) -> list:
    return [r.get("status") for r in fake.requests_for(route)]


def gaps(fake, route: str) -> list[float]:
    times = [r["ts"] for r in fake.requests_for(route)]
    return [b - a for a, b in itertools.pairwise(times)]


def assert_apologized(turn, result, code: str) -> None:
    """An error turn that speaks: the error's code, a short "Sorry" reply, and its audio."""
    assert result.status == "error", result
    assert result.error is not None and result.error["code"] == code, result.error
    assert result.reply and result.reply.startswith("Sorry") and len(result.reply) < 120
    assert len(turn.audio()) > 0, "the apology was not spoken"


# -- 429 ------------------------------------------------------------------------------------


def test_429_with_retry_after_is_honoured_by_every_provider(client, fake, reliability_case):
    case = reliability_case("429 + Retry-After on STT, LLM and TTS")
    fake.inject("transcriptions", status=429, headers={"Retry-After": "1"})
    fake.inject("chat", status=429, headers={"retry-after-ms": "700"})
    fake.inject("tts", status=429, headers={"Retry-After": "1"})
    turn = client.say(AUDIO, session="rel-429")
    result = case.check(turn)
    assert result.status == "ok", result.error
    for route, wait in (("transcriptions", 1.0), ("chat", 0.7), ("tts", 1.0)):
        assert statuses(fake, route) == [429, 200], route
        assert gaps(fake, route)[0] >= wait, f"{route} retried before its Retry-After"
    case.note("each provider retried once, after its Retry-After")


def test_a_retry_after_past_the_deadline_fails_at_once_with_an_apology(
    client, fake, reliability_case
):
    case = reliability_case("429 with Retry-After past the deadline")
    fake.inject("chat", status=429, headers={"Retry-After": "20"})
    turn = client.ask("are you busy", session="rel-429-long", deadline_s=10)
    result = case.check(turn)
    assert_apologized(turn, result, "llm-failed")
    assert statuses(fake, "chat") == [429], "it waited for a Retry-After past the deadline"
    ended = case.audits[-1].ended_at
    assert ended is not None and ended < turn.spec.deadline, "the turn waited for its deadline"
    case.note("no retry; llm-failed + spoken apology before the deadline")


# -- 5xx bursts -------------------------------------------------------------------------------


def test_5xx_bursts_on_every_provider_are_retried(client, fake, reliability_case):
    case = reliability_case("bursts of 500/503 on STT, LLM and TTS (3 each)")
    fake.inject("transcriptions", status=500, times=3)
    fake.inject("chat", status=503, times=3)
    fake.inject("tts", status=503, times=3)
    turn = client.say(AUDIO, session="rel-5xx")
    result = case.check(turn)
    assert result.status == "ok", result.error
    assert statuses(fake, "transcriptions") == [500, 500, 500, 200]
    assert statuses(fake, "chat") == [503, 503, 503, 200]
    assert statuses(fake, "tts")[:4] == [503, 503, 503, 200]
    case.note("4 attempts each, then ok")


def test_backoff_is_exponential_with_jitter_and_capped(strict, fake_providers, reliability_case):
    """Base 0.2 s, cap 0.8 s: the n-th wait is uniform in [0, min(0.8, 0.2 * 2**(n-1))]."""
    fake = fake_providers
    fake.reset()
    case = reliability_case("a burst of five 503s, backoff 0.2 s doubling to a 0.8 s cap")
    client = strict.client()
    bounds = [0.2, 0.4, 0.8, 0.8, 0.8]
    waits: list[float] = []
    for i in range(3):
        fake.reset()
        fake.inject("chat", status=503, times=5)
        result = case.check(client.ask(f"burst {i}", session=f"rel-backoff-{i}", speak=False))
        assert result.status == "ok", result.error
        assert statuses(fake, "chat") == [503] * 5 + [200]
        seen = gaps(fake, "chat")
        # Bounded: no wait over its bound (plus a generous allowance for a loaded machine).
        for n, (gap, bound) in enumerate(zip(seen, bounds, strict=True)):
            assert gap <= bound + 1.0, f"wait {n + 1} was {gap:.2f} s, over its {bound} s bound"
        waits += [gap / bound for gap, bound in zip(seen, bounds, strict=True)]
    # Jitter: with fixed waits every gap would sit at (or above) its bound.
    assert min(waits) < 0.9, f"no wait was shorter than its bound: {waits}"
    case.note("15 waits, each within its bound, jittered")


def test_a_provider_that_stays_down_ends_the_turn_with_an_apology(client, fake, reliability_case):
    case = reliability_case("STT down (500 on every attempt)")
    fake.inject("transcriptions", status=500, times=20)
    turn = client.say(AUDIO, session="rel-stt-down")
    result = case.check(turn)
    assert_apologized(turn, result, "stt-failed")
    assert len(fake.requests_for("transcriptions")) == client.settings.providers.max_attempts
    assert fake.requests_for("chat") == []
    case.note(f"{client.settings.providers.max_attempts} attempts, stt-failed, spoken apology")


def test_tts_that_stays_down_ends_the_turn_with_a_coded_error(client, fake, reliability_case):
    case = reliability_case("TTS down (503 on every attempt)")
    fake.inject("tts", status=503, times=20)
    turn = client.ask("say something", session="rel-tts-down")
    result = case.check(turn)
    assert result.status == "error"
    assert result.error is not None and result.error["code"] == "tts-failed"
    assert result.reply == "You said: say something"  # the text reply is still delivered
    case.note("tts-failed error event; the reply text still reaches the caller")


# -- timeouts and connection resets -------------------------------------------------------------


def test_a_timed_out_call_is_retried_on_every_provider(strict, fake_providers, reliability_case):
    fake = fake_providers
    fake.reset()
    case = reliability_case("one 4 s stall per provider (1 s timeout)")
    for route in ("transcriptions", "chat", "tts"):
        fake.inject(route, delay=4.0)
    turn = strict.client().say(AUDIO, session="rel-timeout")
    result = case.check(turn)
    assert result.status == "ok", result.error
    for route in ("transcriptions", "chat", "tts"):
        requests = fake.requests_for(route)
        assert len(requests) >= 2, route
        gap = requests[1]["ts"] - requests[0]["ts"]
        assert 0.9 <= gap < 3.5, f"{route}: retried after {gap:.1f} s, not after a 1 s timeout"
    case.note("each provider timed out once after 1 s, retried, ok")


def test_a_provider_that_never_answers_ends_by_the_deadline(
    strict, fake_providers, reliability_case
):
    fake = fake_providers
    fake.reset()
    case = reliability_case("LLM never answers (every call stalls)")
    fake.inject("chat", delay=4.0, times=20)
    turn = strict.client().ask("hello?", session="rel-stall", deadline_s=10)
    result = case.check(turn)
    assert result.status in ("error", "timeout"), result
    assert result.error is not None and result.error["code"] in ("llm-failed", "timeout")
    if result.status == "error":
        assert_apologized(turn, result, "llm-failed")
    case.note(f"ended {result.status} ({result.error['code']}) within the 10 s deadline")


def test_connection_resets_are_retried(client, fake, reliability_case):
    case = reliability_case("connection reset by every provider, once")
    for route in ("transcriptions", "chat", "tts"):
        fake.inject(route, reset=True)
    turn = client.say(AUDIO, session="rel-reset")
    result = case.check(turn)
    assert result.status == "ok", result.error
    for route in ("transcriptions", "chat", "tts"):
        assert statuses(fake, route)[:2] == ["aborted", 200], route
    case.note("retried after each reset, ok")


def test_an_llm_that_keeps_resetting_ends_with_an_apology(client, fake, reliability_case):
    case = reliability_case("LLM resets every connection")
    fake.inject("chat", reset=True, times=20)
    turn = client.ask("anyone?", session="rel-reset-down")
    result = case.check(turn)
    assert_apologized(turn, result, "llm-failed")
    assert len(fake.requests_for("chat")) == client.settings.providers.max_attempts
    case.note(f"{client.settings.providers.max_attempts} attempts, llm-failed, spoken apology")


# -- broken streams and answers -----------------------------------------------------------------

ADD = {"name": "add_numbers", "arguments": {"a": 2, "b": 3}}


def test_a_stream_cut_inside_a_tool_call_is_retried_and_the_tool_runs_once(
    client, fake, reliability_case
):
    case = reliability_case("LLM stream cut inside a tool call's arguments")
    fake.script_chat(
        {"match": "cut", "tool_calls": [ADD]},
        {"match": "cut", "tool_calls": [ADD]},
        {"after_tool": True, "content": "Two plus three is five."},
    )
    # role, tool-call header, first argument fragment, then the connection drops.
    fake.inject("chat", cut_after_chunks=3)
    turn = client.ask("cut and add", session="rel-cut-call")
    result = case.check(turn)
    assert result.status == "ok", result.error
    assert statuses(fake, "chat") == ["aborted", 200, 200]
    assert [(c.name, c.result) for c in result.tool_calls] == [("add_numbers", "5")]
    assert result.reply == "Two plus three is five."
    case.note("the cut answer was dropped, asked again, the tool ran once")


def test_a_stream_cut_after_speech_began_is_not_repeated_but_apologized(
    client, fake, reliability_case
):
    case = reliability_case("LLM stream cut inside a tool call, after a spoken sentence")
    fake.script_chat(
        {"match": "cut", "content": "Let me add those. One moment.", "tool_calls": [ADD]}
    )
    # role, six words, tool-call header, first argument fragment, then the connection drops.
    fake.inject("chat", cut_after_chunks=9)
    turn = client.ask("cut after speaking", session="rel-cut-spoken")
    result = case.check(turn)
    assert_apologized(turn, result, "llm-failed")
    assert statuses(fake, "chat") == ["aborted"], "retrying would say the sentence twice"
    assert result.tool_calls == []
    spoken = [r["json"]["text"] for r in fake.requests_for("tts")]
    assert spoken.count("Let me add those.") == 1, spoken
    case.note("the spoken sentence is not repeated; llm-failed + apology; the tool never ran")


def test_a_malformed_stream_chunk_ends_the_turn_with_a_coded_error(client, fake, reliability_case):
    case = reliability_case("malformed chunk in the LLM stream")
    fake.script_chat({"match": "garbled", "content": "This answer will break halfway through."})
    fake.inject("chat", malformed_after_chunks=3)
    turn = client.ask("garbled stream", session="rel-garbled")
    result = case.check(turn)
    assert_apologized(turn, result, "llm-failed")
    assert "malformed" in result.error["message"], result.error
    case.note("llm-failed naming the malformed chunk, a spoken apology; the worker lives on")


def test_malformed_tool_call_json_reaches_the_model_as_an_error(client, fake, reliability_case):
    case = reliability_case("malformed tool-call JSON from the LLM")
    bad = [
        {"id": "c_cut", "name": "add_numbers", "arguments": '{"a": 1, "b": '},
        {"id": "c_list", "name": "add_numbers", "arguments": "[1, 2]"},
        {"id": "c_null", "name": "add_numbers", "arguments": "null"},
        {"id": "c_junk", "name": "add_numbers", "arguments": "a=1&b=2"},
    ]
    fake.script_chat(
        {"match": "malformed", "tool_calls": bad},
        {"after_tool": True, "content": "Those arguments were broken."},
    )
    result = case.check(client.ask("malformed calls", session="rel-bad-json", speak=False))
    assert result.status == "ok", result.error
    messages = fake.chat_requests()[-1]["messages"]
    tool_msgs = {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}
    assert set(tool_msgs) == {c["id"] for c in bad}
    assert all(v.startswith("Error") and "add_numbers" in v for v in tool_msgs.values())
    assert "not valid JSON" in tool_msgs["c_cut"] and "not valid JSON" in tool_msgs["c_junk"]
    assert "must be a JSON object" in tool_msgs["c_list"]
    assert all(c.error for c in result.tool_calls)
    case.note("4 broken calls, each answered with an error tool message; the turn ends ok")


@pytest.mark.parametrize("said", ["", "   "])
def test_an_empty_transcript_ends_with_a_spoken_apology(client, fake, reliability_case, said):
    case = reliability_case(f"empty transcript ({said!r})")
    fake.script_transcripts(said)
    turn = client.say(AUDIO, session="rel-empty")
    result = case.check(turn)
    assert_apologized(turn, result, "stt-no-text-recognized")
    assert result.reply == "Sorry, I didn't catch that."
    assert fake.requests_for("chat") == []
    case.note('stt-no-text-recognized; "Sorry, I didn\'t catch that." spoken; no LLM call')


def test_tts_failing_mid_stream_ends_the_turn_with_a_coded_error(client, fake, reliability_case):
    case = reliability_case("TTS stream cut mid-sentence")
    fake.script_chat(
        {
            "match": "story",
            "content": "Once upon a time there was a queue. It never lost a turn. The end.",
        }
    )
    fake.inject("tts", cut_after_chunks=2)
    turn = client.ask("tell me a story", session="rel-tts-cut")
    result = case.check(turn)
    assert result.status == "error"
    assert result.error is not None and result.error["code"] == "tts-failed"
    assert "broke" in result.error["message"]
    assert statuses(fake, "tts")[0] == "aborted"
    case.note("tts-failed after 2 chunks; not re-synthesized (it would be heard twice)")


def test_tts_failing_mid_stream_is_followed_by_a_spoken_apology(client, fake, reliability_case):
    case = reliability_case("TTS stream cut mid-sentence: spoken apology expected")
    fake.script_chat({"match": "tale", "content": "Once upon a time there was a queue."})
    fake.inject("tts", cut_after_chunks=2)
    turn = client.ask("tell me a tale", session="rel-tts-apology")
    result = case.check(turn)
    assert result.error is not None and result.error["code"] == "tts-failed"
    apologies = [
        e for e in turn._entries if e.event.type == "reply" and e.event.data.get("apology")
    ]
    assert apologies, "no apology after the TTS stream broke"
    case.note("tts-failed, then \"Sorry, something went wrong…\" spoken")


# -- the end of a turn is its last event -------------------------------------------------------


def test_run_end_is_the_last_event_even_when_an_answer_arrives_after_a_cancel(
    client, fake, reliability_case
):
    case = reliability_case("LLM answer arriving after the turn was cancelled")
    fake.inject("chat", delay=2.0)
    turn = client.ask("slow answer", session="rel-late-answer")
    wait_until(lambda: any(e.event.type == "llm-start" for e in client.store.history(turn.turn_id)),
               "the model's call")
    turn.cancel()  # during the model's (2 s) call
    result = case.check(turn)
    assert result.status == "cancelled"
    fake.wait_for_requests("chat", 1)
    # The answer arrives and the agent step finishes: no task of the turn is left.
    wait_until(lambda: not tasks_of_turn(client.redis, turn.turn_id), "the agent step to end",
               timeout=30)
    late = audit(client.store, turn)  # read the stream again: events may have come since
    case.note(f"{late.after_end} event(s) after run-end")
    assert late.after_end == 0, f"{late.after_end} event(s) after run-end"
