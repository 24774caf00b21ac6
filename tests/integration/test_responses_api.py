"""The agent loop through OpenAI's Responses API (``VOXQUEUE_OPENAI_API=responses``), on real
workers against the fake's ``/v1/responses``: a streamed reply, parallel tools answered by
``call_id``, bad arguments, Retry-After, cancel mid-stream, reasoning items passed back, and a
session switching API between turns, and an agent killed after storing an answer with
reasoning.

Runs its own System on Redis DB 6 (agent, tools, tts).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import redis

from testkit.fakes.responses_wire import decrypted
from testkit.waiting import tasks_of_turn
from tests.conftest import RedisServer, System, system_env
from voxqueue.sessions import Sessions

pytestmark = pytest.mark.integration

QUEUES = ("agent", "tools", "tts")


@pytest.fixture(scope="module")
def responses(redis_server: RedisServer, fake_providers: object,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[System]:
    url = redis_server.url.rsplit("/", 1)[0] + "/6"
    redis.Redis.from_url(url).flushdb()
    env = system_env(url, fake_providers, VOXQUEUE_OPENAI_API="responses",
                     VOXQUEUE_LLM_MODEL="o4-mini",  # a reasoning model
                     VOXQUEUE_CRASH_AT="plan")  # only a session with a crash plan is killed
    system = System(env, tmp_path_factory.mktemp("responses-logs"), beat=False)
    system.start(QUEUES)
    yield system
    system.stop()


@pytest.fixture
def client(responses: System, fake: object):
    return responses.client()


def events(turn, kind: str) -> list[dict]:
    return [e.event.data for e in turn._entries if e.event.type == kind]


def use_api(system: System, api: str) -> None:
    """Restart the agent worker with ``VOXQUEUE_OPENAI_API=api`` (between turns)."""
    agent = next(p for p in system.sup.procs if p.name == "worker-agent")
    system.sup.stop(agent)
    system.sup.start(agent.name, agent.argv, {"VOXQUEUE_OPENAI_API": api})
    system.sup.wait_for_workers((), names=["agent"])


def test_a_reply_streams_through_the_responses_api_into_sentences(client, fake):
    fake.set_profile(llm_tokens_per_s=6)  # the reply streams for seconds
    reply = "The first sentence comes early. The second one follows later."
    fake.script_chat({"match": "stream", "content": reply})
    turn = client.ask("stream it", session="resp-reply")
    result = turn.wait(timeout=60)
    assert result.status == "ok", result.error
    assert result.reply == reply
    order = [e.event.type for e in turn._entries]
    assert order.index("tts-chunk") < order.index("llm-end"), order  # spoken while streaming
    body = fake.responses_requests()[-1]
    assert body["stream"] is True and body["store"] is False
    assert body["include"] == ["reasoning.encrypted_content"]
    assert body["input"][-1] == {"role": "user", "content": "stream it"}
    assert fake.chat_requests() == []
    end = events(turn, "llm-end")[0]
    assert end["usage"]["total_tokens"] == end["usage"]["prompt_tokens"] + end["usage"][
        "completion_tokens"] > 0
    assert events(turn, "llm-start")[0]["provider"] == "openai-responses"


def test_two_parallel_tools_go_back_as_function_call_outputs_by_call_id(client, fake):
    fake.script_chat(
        {"match": "sum and product", "content": "Let me work both out.",
         "tool_calls": [{"id": "call_sum", "name": "add_numbers", "arguments": {"a": 20, "b": 22}},
                        {"id": "call_product", "name": "calculate",
                         "arguments": {"expression": "6 * 7"}}]},
        {"after_tool": True, "content": "Both are 42."})
    result = client.ask("sum and product", session="resp-tools", speak=False).wait(timeout=60)
    assert result.status == "ok", result.error
    assert result.reply == "Both are 42."
    first, second = fake.responses_requests()[-2:]
    tools = {t["name"]: t for t in first["tools"]}
    assert tools["add_numbers"]["type"] == "function" and "parameters" in tools["add_numbers"]
    calls = [i for i in second["input"] if i.get("type") == "function_call"]
    outputs = {i["call_id"]: i["output"] for i in second["input"]
               if i.get("type") == "function_call_output"}
    assert [c["call_id"] for c in calls] == ["call_sum", "call_product"]
    assert outputs == {"call_sum": "42", "call_product": "6 times 7 is 42."}
    kinds = [i.get("type", i.get("role")) for i in second["input"]]
    assert kinds[-5:] == ["assistant", "function_call", "function_call", "function_call_output",
                          "function_call_output"], kinds


def test_bad_tool_arguments_go_back_to_the_model_as_an_error_output(client, fake):
    fake.script_chat(
        {"match": "broken", "tool_calls": [
            {"id": "c_json", "name": "add_numbers", "arguments": '{"a": 1, "b": '},
            {"id": "c_invalid", "name": "add_numbers", "arguments": {"a": "one", "b": 2}}]},
        {"after_tool": True, "content": "I could not add those."})
    result = client.ask("broken sums", session="resp-bad", speak=False).wait(timeout=60)
    assert result.status == "ok", result.error
    assert result.reply == "I could not add those."
    outputs = {i["call_id"]: i["output"] for i in fake.responses_requests()[-1]["input"]
               if i.get("type") == "function_call_output"}
    assert set(outputs) == {"c_json", "c_invalid"}
    assert "not valid JSON" in outputs["c_json"]
    assert "invalid arguments for add_numbers" in outputs["c_invalid"]
    assert all(v.startswith("Error") for v in outputs.values())


def test_a_429_with_retry_after_is_retried_after_it(client, fake):
    fake.inject("responses", status=429, headers={"retry-after-ms": "400"})
    result = client.ask("hello again", session="resp-retry", speak=False).wait(timeout=30)
    assert result.status == "ok", result.error
    calls = fake.requests_for("responses")
    assert [r["status"] for r in calls] == [429, 200]
    assert calls[1]["ts"] - calls[0]["ts"] >= 0.4


def test_cancel_mid_stream_stops_the_responses_stream(client, fake):
    fake.set_profile(llm_tokens_per_s=12)  # a six-sentence reply streams for about 5 s
    reply = " ".join(f"This is sentence number {n} of a long answer." for n in range(6))
    fake.script_chat({"match": "long streamed answer", "content": reply})
    turn = client.ask("a long streamed answer please", session="resp-cancel")
    give_up = time.time() + 20
    while not any(e.event.type == "tts-start" for e in client.store.history(turn.turn_id)):
        assert time.time() < give_up, "no sentence was spoken"
        time.sleep(0.05)
    turn.cancel()
    at_cancel = int(client.redis.hget(client.keys.turn(turn.turn_id), "tts_sent") or 0)
    give_up = time.time() + 30
    while tasks_of_turn(client.redis, turn.turn_id):
        assert time.time() < give_up, "a stage kept running after the cancel"
        time.sleep(0.1)
    sent = int(client.redis.hget(client.keys.turn(turn.turn_id), "tts_sent") or 0)
    assert sent <= at_cancel + 1 < 6, "sentences were still queued after the cancel"
    assert "llm-end" not in [e.event.type for e in client.store.history(turn.turn_id)]
    assert turn.wait(timeout=10).status == "cancelled"


def test_a_reasoning_item_is_passed_back_on_the_next_step(client, fake):
    fake.script_chat(
        {"match": "think", "reasoning": "The user wants a sum: call add_numbers.",
         "tool_calls": [{"id": "call_think", "name": "add_numbers",
                         "arguments": {"a": 1, "b": 2}}]},
        {"after_tool": True, "content": "It is 3."})
    result = client.ask("think and add", session="resp-reasoning", speak=False).wait(timeout=60)
    assert result.status == "ok", result.error
    second = fake.responses_requests()[-1]["input"]
    kinds = [i.get("type", i.get("role")) for i in second]
    assert kinds[-3:] == ["reasoning", "function_call", "function_call_output"], kinds
    item = second[-3]
    assert item["id"].startswith("rs_")
    assert decrypted(item["encrypted_content"]) == "The user wants a sum: call add_numbers."
    assert item["summary"] == [{"type": "summary_text",
                                "text": "The user wants a sum: call add_numbers."}]


def test_a_session_switches_api_between_turns(responses, client, fake):
    fake.script_chat(
        {"match": "weigh", "reasoning": "Add them.",
         "tool_calls": [{"id": "call_w", "name": "add_numbers", "arguments": {"a": 2, "b": 3}}]},
        {"after_tool": True, "content": "Five kilos."})
    first = client.ask("weigh the bags", session="resp-switch", speak=False).wait(timeout=60)
    assert first.status == "ok", first.error
    stored = Sessions(client.redis, client.keys, client.settings).history("resp-switch") or []
    assert any(m.get("reasoning") for m in stored)  # kept beside the call in our history
    try:
        use_api(responses, "chat")
        fake.script_chat({"match": "again", "content": "Still five."})
        second = client.ask("again please", session="resp-switch", speak=False).wait(timeout=60)
        assert second.status == "ok", second.error
        messages = fake.chat_requests()[-1]["messages"]
        calls = [m for m in messages if m.get("tool_calls")]
        assert calls and calls[0]["tool_calls"][0]["id"] == "call_w"
        assert all("reasoning" not in m for m in messages)  # never sent to Chat Completions
        assert [m["tool_call_id"] for m in messages if m["role"] == "tool"] == ["call_w"]
    finally:
        use_api(responses, "responses")
    fake.script_chat({"match": "once more", "content": "Five, as before."})
    third = client.ask("once more", session="resp-switch", speak=False).wait(timeout=60)
    assert third.status == "ok", third.error
    items = fake.responses_requests()[-1]["input"]
    kinds = [i.get("type", i.get("role")) for i in items]
    start = kinds.index("reasoning")
    assert kinds[start:start + 3] == ["reasoning", "function_call", "function_call_output"]
    assert {"role": "assistant", "content": "Still five."} in items  # the chat turn's reply
    assert items[-1] == {"role": "user", "content": "once more"}


def test_an_agent_killed_after_storing_a_reasoning_answer_passes_the_reasoning_on(
        responses, client, fake):
    """The stored answer keeps its reasoning items: the step delivered again after its worker
    died does not ask the model again, and the next step still gets them."""
    fake.script_chat(
        {"match": "crash", "reasoning": "Add two and two.",
         "tool_calls": [{"id": "call_crash", "name": "add_numbers",
                         "arguments": {"a": 2, "b": 2}}]},
        {"after_tool": True, "content": "Four."})
    session = "resp-crash"
    client.redis.set(client.keys.crash_plan(session), "agent.after-answer", ex=600)
    turn = client.ask("crash and add", session=session, speak=False)
    give_up = time.time() + 30
    while client.redis.get(client.keys.crash_fired(turn.turn_id)) is None:
        assert time.time() < give_up, "the crash point was never reached"
        time.sleep(0.1)
    agent = next(p for p in responses.sup.procs if p.name == "worker-agent")
    agent.popen.wait(10)
    responses.restart_dead()  # as voxqueue up would; the lease hands the step back to it
    result = turn.wait(timeout=60)
    assert result.status == "ok", result.error
    assert result.reply == "Four."
    asked = fake.responses_requests()
    assert len(asked) == 2  # the stored answer was replayed, not asked for again
    kinds = [i.get("type", i.get("role")) for i in asked[1]["input"]]
    assert kinds[-3:] == ["reasoning", "function_call", "function_call_output"], kinds
    assert decrypted(asked[1]["input"][-3]["encrypted_content"]) == "Add two and two."
