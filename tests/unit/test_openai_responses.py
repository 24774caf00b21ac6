"""The Responses API provider: the history's conversion to input items, the fake's wire checked
against the SDK's own event types, and the provider's stream handling (retries, cuts, stops)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any, Literal

import httpx
import pytest
from openai.types.responses import ResponseStreamEvent
from pydantic import SecretStr, TypeAdapter

from testkit.fakes import FakeProviders
from voxqueue.observability.doctor import check_providers
from voxqueue.settings import Settings
from voxqueue.settings_providers import ProviderSettings
from workers.agent import messages as msg
from workers.agent.providers import openai_model
from workers.agent.providers.base import StreamStopped
from workers.agent.providers.openai_chat import OpenAIChat
from workers.agent.providers.openai_responses import (
    OpenAIResponses,
    to_input,
    to_tools,
    usage_of,
)
from workers.runtime.retry import ProviderError

REASONING = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "enc_x"}
HISTORY = [
    msg.system("You are terse."),
    msg.user("add 1 and 2, and time"),
    msg.assistant_tool_calls([{"id": "call_a", "name": "add_numbers", "arguments": '{"a":1}'},
                              {"id": "call_b", "name": "get_current_time", "arguments": "{}"}],
                             "Checking.", [REASONING]),
    msg.tool_result("call_a", "3", say="It is 3."),
    msg.tool_error("call_b", "no clock"),
    msg.assistant("3, and I have no clock."),
]
ADD = {"type": "function", "function": {
    "name": "add_numbers", "description": "Add two numbers.",
    "parameters": {"type": "object", "properties": {"a": {"type": "number"}}}}}


@pytest.fixture
def fake() -> Iterator[FakeProviders]:
    with FakeProviders() as server:
        yield server


def settings(fake: FakeProviders, api: Literal["chat", "responses"] = "responses",
             model: str = "o4-mini") -> Settings:
    return Settings(providers=ProviderSettings(
        openai_api_key=SecretStr("sk-test"), openai_base_url=fake.openai_base_url,
        openai_api=api, llm_model=model, backoff_s=0.01, prefer_local=False))


def test_the_history_becomes_input_items_with_calls_outputs_and_reasoning():
    assert to_input(HISTORY) == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "add 1 and 2, and time"},
        REASONING,
        {"role": "assistant", "content": "Checking."},
        {"type": "function_call", "call_id": "call_a", "name": "add_numbers",
         "arguments": '{"a":1}'},
        {"type": "function_call", "call_id": "call_b", "name": "get_current_time",
         "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_a", "output": "3"},
        {"type": "function_call_output", "call_id": "call_b", "output": "Error: no clock"},
        {"role": "assistant", "content": "3, and I have no clock."},
    ]


def test_chat_completions_never_get_the_reasoning_items_or_our_keys():
    sent = msg.for_model(HISTORY)
    assert all(set(m) <= {"role", "content", "tool_calls", "tool_call_id"} for m in sent)
    assert sent[2]["tool_calls"][1]["id"] == "call_b"


def test_tools_and_usage_are_converted():
    assert to_tools([ADD]) == [{
        "type": "function", "name": "add_numbers", "description": "Add two numbers.",
        "parameters": {"type": "object", "properties": {"a": {"type": "number"}}},
        "strict": False}]
    usage = {"input_tokens": 10, "output_tokens": 4, "total_tokens": 14,
             "output_tokens_details": {"reasoning_tokens": 3},
             "input_tokens_details": {"cached_tokens": 2}}
    assert usage_of(usage) == {"prompt_tokens": 10, "completion_tokens": 4, "total_tokens": 14,
                               "completion_tokens_details": {"reasoning_tokens": 3},
                               "prompt_tokens_details": {"cached_tokens": 2}}


def sse(text: str) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for frame in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in frame.split("\n"))
        out.append((lines["event"], json.loads(lines["data"])))
    return out


def test_every_event_the_fake_streams_is_one_of_the_sdks_event_types(fake):
    fake.script_chat({"reasoning": "Sum it.", "content": "On it.", "tool_calls": [
        {"id": "c1", "name": "add_numbers", "arguments": {"a": 1}},
        {"id": "c2", "name": "add_numbers", "arguments": {"a": 2}}]})
    body = {"model": "gpt-x", "input": to_input(HISTORY[:2]), "tools": to_tools([ADD]),
            "stream": True, "store": False}
    answer = httpx.post(fake.openai_base_url + "/responses", json=body, timeout=10,
                        headers={"Authorization": "Bearer sk-test"})
    assert answer.headers["content-type"].startswith("text/event-stream")
    events = sse(answer.text)
    adapter: TypeAdapter[Any] = TypeAdapter(ResponseStreamEvent)
    for name, data in events:
        parsed = adapter.validate_python(data)  # strict pydantic validation, not construct
        assert parsed.type == name
    assert [d["sequence_number"] for _, d in events] == list(range(len(events)))
    kinds = [name.removeprefix("response.") for name, _ in events]
    call = ["output_item.added", "function_call_arguments.delta",
            "function_call_arguments.done", "output_item.done"]
    assert kinds[:10] == ["created", "in_progress", "output_item.added", "output_item.done",
                          "output_item.added", "content_part.added", "output_text.delta",
                          "output_text.delta", "output_text.done", "content_part.done"]
    assert kinds[10] == "output_item.done"
    rest = [k for k in kinds[11:] if k != "function_call_arguments.delta"]
    assert rest == [k for k in call if k != "function_call_arguments.delta"] * 2 + ["completed"]
    done = events[-1][1]["response"]
    assert [i["type"] for i in done["output"]] == ["reasoning", "message", "function_call",
                                                   "function_call"]
    assert done["usage"]["total_tokens"] > 0


def test_the_provider_reads_text_calls_reasoning_and_usage(fake):
    fake.script_chat({"reasoning": "Sum it.", "content": "Adding. Now.", "tool_calls": [
        {"id": "c1", "name": "add_numbers", "arguments": {"a": 1}},
        {"id": "c2", "name": "add_numbers", "arguments": '{"a": '}]})
    heard: list[str] = []
    answer = OpenAIResponses(settings(fake)).complete(
        HISTORY[:2], [ADD], deadline=time.time() + 10, on_text=heard.append)
    assert "".join(heard) == answer.text == "Adding. Now."
    assert [(c.id, c.arguments) for c in answer.tool_calls] == [("c1", '{"a": 1}'),
                                                                ("c2", '{"a": ')]
    assert answer.reasoning[0]["type"] == "reasoning" and answer.reasoning[0]["encrypted_content"]
    assert set(answer.reasoning[0]) == {"type", "id", "summary", "encrypted_content"}
    assert answer.usage["completion_tokens_details"]["reasoning_tokens"] == 2
    assert answer.finish_reason == "tool_calls"
    body = fake.responses_requests()[0]
    assert body["tools"] == to_tools([ADD]) and body["store"] is False


def test_a_stream_cut_before_any_text_is_retried_and_after_text_is_not(fake):
    model = OpenAIResponses(settings(fake))
    fake.inject("responses", cut_after_chunks=2)  # before the first delta
    fake.script_chat({"content": "Hello there.", "repeat": True})
    assert model.complete(HISTORY[:2], [], deadline=time.time() + 10).text == "Hello there."
    cuts = [r.get("fault", {}).get("cut_after_chunks") for r in fake.requests_for("responses")]
    assert cuts == [2, None]  # cut, then answered whole
    fake.reset()
    fake.inject("responses", cut_after_chunks=6)  # after "Hello"
    fake.script_chat({"content": "Hello there friend."})
    with pytest.raises(ProviderError):
        model.complete(HISTORY[:2], [], deadline=time.time() + 10, on_text=lambda _t: None)
    assert len(fake.requests_for("responses")) == 1  # a retry would say "Hello" twice


def test_a_stop_from_the_listener_ends_the_stream_unretried(fake):
    fake.script_chat({"content": "One. Two. Three."})

    def stop(_text: str) -> None:
        raise StreamStopped

    with pytest.raises(StreamStopped):
        OpenAIResponses(settings(fake)).complete(HISTORY[:2], [], deadline=time.time() + 10,
                                                 on_text=stop)
    assert len(fake.requests_for("responses")) == 1


def test_the_setting_picks_the_api_and_the_doctor_names_it(fake):
    assert isinstance(openai_model(settings(fake, "chat")), OpenAIChat)
    assert isinstance(openai_model(settings(fake)), OpenAIResponses)
    llm = {c.name: c.detail for c in check_providers(settings(fake))}["llm provider"]
    assert "OpenAI Responses API" in llm
    llm = {c.name: c.detail for c in check_providers(settings(fake, "chat"))}["llm provider"]
    assert "OpenAI Chat Completions API" in llm


def test_encrypted_reasoning_is_asked_of_reasoning_models_only(fake):
    """OpenAI refuses ``include=["reasoning.encrypted_content"]`` for a model that does not
    reason (the fake too, for the models it knows): asked for o-series and gpt-5 models."""
    asks = {name: settings(fake, model=name).providers.wants_encrypted_reasoning()
            for name in ("o4-mini", "o3", "gpt-5", "gpt-5-mini", "gpt-5-chat-latest",
                         "gpt-4o-mini", "gpt-4.1", "llama3.2", "openai/o3")}
    assert asks == {"o4-mini": True, "o3": True, "gpt-5": True, "gpt-5-mini": True,
                    "gpt-5-chat-latest": False, "gpt-4o-mini": False, "gpt-4.1": False,
                    "llama3.2": False, "openai/o3": True}
    fake.script_chat({"content": "Hi.", "repeat": True})
    for name in ("gpt-4o-mini", "o4-mini"):
        answer = OpenAIResponses(settings(fake, model=name)).complete(
            HISTORY[:2], [], deadline=time.time() + 10)
        assert answer.text == "Hi."
    plain, reasoning = fake.responses_requests()
    assert "include" not in plain
    assert reasoning["include"] == ["reasoning.encrypted_content"]
    forced = settings(fake, model="gpt-4o-mini")
    forced.providers.openai_encrypted_reasoning = "on"
    with pytest.raises(ProviderError, match="HTTP 400"):  # as OpenAI answers it
        OpenAIResponses(forced).complete(HISTORY[:2], [], deadline=time.time() + 10)


def test_a_reasoning_item_without_encrypted_content_is_not_kept(fake):
    """With store=false the API cannot look a reasoning item up by id: one that came without
    its encrypted content is not passed back."""
    fake.script_chat({"reasoning": "Hm.", "tool_calls": [{"name": "add_numbers"}]})
    forced = settings(fake, model="o4-mini")
    forced.providers.openai_encrypted_reasoning = "off"
    answer = OpenAIResponses(forced).complete(HISTORY[:2], [ADD], deadline=time.time() + 10)
    assert answer.tool_calls and answer.reasoning == []


def test_the_sdks_typed_stream_reads_the_fake(fake):
    """``client.responses.create(stream=True)``, the SDK's typed path, parses the fake's
    stream into its own event classes, the finished response included."""
    import openai

    fake.script_chat({"reasoning": "Hm.", "content": "Hi there.",
                      "tool_calls": [{"id": "c1", "name": "add_numbers", "arguments": {"a": 1}}]})
    client = openai.OpenAI(api_key="sk-test", base_url=fake.openai_base_url, max_retries=0)
    with client.responses.create(model="o4-mini", input="hi", stream=True, store=False,
                                 include=["reasoning.encrypted_content"]) as stream:
        events = list(stream)
    assert type(events[0]).__name__ == "ResponseCreatedEvent"
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == "Hi there."
    done = events[-1]
    assert done.type == "response.completed" and done.response.usage is not None
    assert [i.type for i in done.response.output] == ["reasoning", "message", "function_call"]
    assert done.response.output[2].call_id == "c1"  # type: ignore[union-attr]
    assert done.response.output_text == "Hi there."
    client.close()


@pytest.mark.parametrize(("event", "retryable"), [
    ({"type": "error", "code": "server_error", "message": "boom", "sequence_number": 3}, True),
    ({"type": "response.failed", "sequence_number": 3, "response": {
        "error": {"code": "invalid_prompt", "message": "no"}}}, False),
    ({"type": "response.output_text.delta", "sequence_number": 3}, False),  # no delta
    (["not", "an", "event"], False),
])
def test_a_failed_or_malformed_event_is_a_provider_error(event, retryable):
    from workers.agent.providers.base import Answer
    from workers.agent.providers.openai_responses import _Fold

    with pytest.raises(ProviderError) as caught:
        _Fold(Answer(), lambda _t: None).apply(event)
    assert caught.value.retryable is retryable
