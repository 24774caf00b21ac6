"""OpenAI's Responses API through the official SDK's request path (``POST /responses``, what
``client.responses.create(..., stream=True)`` sends, events left as JSON), streamed and
stateless: the history is ours (``store=false``, no ``previous_response_id``), and a reasoning
model's reasoning items come back encrypted (``include=["reasoning.encrypted_content"]``,
refused for other models: ``wants_encrypted_reasoning``) to be passed back on the next step.

The session history stays in the chat-completions shape; ``to_input`` turns it into the
Responses input items (an assistant's ``tool_calls`` become ``function_call`` items, ``tool``
messages ``function_call_output`` items with the same ``call_id``, and the reasoning items kept
under the assistant message's ``reasoning`` key go back in front of them). The chat provider
never sends that key (``messages.for_model``), so a session can switch API between turns.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from workers.agent.messages import Message
from workers.agent.providers.base import Answer, ToolCallRequest
from workers.agent.providers.openai_streamed import OpenAIStreamed
from workers.runtime.retry import ProviderError

#: Stream errors that say the same request may succeed later.
_RETRYABLE_CODES = frozenset({"server_error", "rate_limit_exceeded", "server_is_overloaded"})


class OpenAIResponses(OpenAIStreamed):
    name = "openai-responses"

    def _stream(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                deadline: float, on_text: Callable[[str], None]) -> Answer:
        s = self.settings
        body: dict[str, Any] = {
            "model": s.providers.llm_model,
            "input": to_input(messages),
            "stream": True,
            "store": False,
        }
        if s.providers.wants_encrypted_reasoning():
            body["include"] = ["reasoning.encrypted_content"]
        if tools:
            body["tools"] = to_tools(tools)
        answer = Answer()
        folded = _Fold(answer, on_text)
        # What ``client.responses.create(..., stream=True)`` sends.
        self._post("/responses", body, deadline, answer, folded.apply)
        if not folded.completed:
            raise ProviderError("the LLM's stream ended before response.completed",
                                retryable=True)
        return folded.answer()


class _Fold:
    """Folds the stream's events (``openai.types.responses.ResponseStreamEvent`` as JSON) into
    an Answer: text deltas forwarded as they arrive, function calls and reasoning items taken
    whole from ``response.output_item.done``."""

    def __init__(self, answer: Answer, on_text: Callable[[str], None]) -> None:
        self._answer = answer
        self._on_text = on_text
        self._text: list[str] = []
        self._calls: dict[int, dict[str, str]] = {}
        self._reasoning: dict[int, dict[str, Any]] = {}
        self.completed = False

    def apply(self, event: Any) -> None:
        if not isinstance(event, dict):
            raise ProviderError(f"the LLM sent a malformed event: {str(event)[:80]!r}")
        try:
            self._apply(event)
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise ProviderError(f"the LLM sent a malformed {event.get('type')!r} event: "
                                f"{str(event)[:80]!r}") from exc

    def _apply(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "response.output_text.delta":
            if delta := str(event["delta"]):
                self._text.append(delta)
                self._on_text(delta)
        elif kind == "response.output_item.added" and event["item"]["type"] == "function_call":
            item = event["item"]
            self._calls[int(event["output_index"])] = {
                "id": str(item["call_id"]), "name": str(item["name"]), "arguments": ""}
        elif kind == "response.function_call_arguments.delta":
            if (call := self._calls.get(int(event["output_index"]))) is not None:
                call["arguments"] += str(event["delta"])
        elif kind == "response.function_call_arguments.done":
            if (call := self._calls.get(int(event["output_index"]))) is not None:
                call["arguments"] = str(event["arguments"])
        elif kind == "response.output_item.done":
            item = event["item"]
            if item["type"] == "function_call":
                self._calls[int(event["output_index"])] = {
                    "id": str(item["call_id"]), "name": str(item["name"]),
                    "arguments": str(item["arguments"])}
            elif item["type"] == "reasoning" and item.get("encrypted_content"):
                # Without its encrypted content a reasoning item cannot be passed back: with
                # store=false the API keeps nothing to look its id up in.
                self._reasoning[int(event["output_index"])] = reasoning_input(item)
        elif kind in ("response.completed", "response.incomplete"):
            self.completed = True
            response = event["response"]
            if isinstance(usage := response.get("usage"), dict):
                self._answer.usage = usage_of(usage)
            if kind == "response.incomplete":
                details = response.get("incomplete_details") or {}
                self._answer.finish_reason = str(details.get("reason") or "incomplete")
        elif kind == "response.failed":
            error = event["response"].get("error") or {}
            raise ProviderError(f"the LLM failed: {error.get('message') or 'no reason'}",
                                retryable=error.get("code") in _RETRYABLE_CODES)
        elif kind == "error":
            raise ProviderError(f"the LLM failed mid-stream: {event.get('message')}",
                                retryable=event.get("code") in _RETRYABLE_CODES)

    def answer(self) -> Answer:
        a = self._answer
        a.text = "".join(self._text).strip()
        a.tool_calls = [ToolCallRequest(id=c["id"] or f"call_{i}", name=c["name"],
                                        arguments=c["arguments"])
                        for i, c in sorted(self._calls.items())]
        a.reasoning = [r for _, r in sorted(self._reasoning.items())]
        a.finish_reason = a.finish_reason or ("tool_calls" if a.tool_calls else "stop")
        return a


def reasoning_input(item: dict[str, Any]) -> dict[str, Any]:
    """A reasoning output item as an input item: its id, summary and encrypted content."""
    return {k: v for k, v in item.items() if k in ("type", "id", "summary", "encrypted_content")}


def usage_of(usage: dict[str, Any]) -> dict[str, Any]:
    """The Responses usage under the chat-completions names (one shape in ``llm-end``)."""
    out: dict[str, Any] = {"prompt_tokens": usage.get("input_tokens", 0),
                           "completion_tokens": usage.get("output_tokens", 0),
                           "total_tokens": usage.get("total_tokens", 0)}
    if (details := usage.get("output_tokens_details")) and "reasoning_tokens" in details:
        out["completion_tokens_details"] = {"reasoning_tokens": details["reasoning_tokens"]}
    if (details := usage.get("input_tokens_details")) and "cached_tokens" in details:
        out["prompt_tokens_details"] = {"cached_tokens": details["cached_tokens"]}
    return out


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def to_input(messages: list[Message]) -> list[dict[str, Any]]:
    """The history (chat-completions messages) as Responses input items."""
    items: list[dict[str, Any]] = []
    for m in messages:
        role = m.get("role")
        if role == "tool":
            items.append({"type": "function_call_output", "call_id": str(m["tool_call_id"]),
                          "output": _text(m.get("content"))})
            continue
        if role == "assistant":
            items.extend(m.get("reasoning") or [])
        text = _text(m.get("content"))
        if text or role != "assistant":
            items.append({"role": role, "content": text})
        for call in (m.get("tool_calls") or []) if role == "assistant" else []:
            fn = call.get("function") or {}
            items.append({"type": "function_call", "call_id": str(call["id"]),
                          "name": str(fn.get("name", "")),
                          "arguments": str(fn.get("arguments") or "")})
    return items


def to_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat tool schemas (``{"type": "function", "function": {...}}``) as Responses function
    tools (the function's fields at the top; ``strict`` off, as chat's default)."""
    out: list[dict[str, Any]] = []
    for tool in tools:
        fn = tool.get("function") if tool.get("type") == "function" else None
        if fn is None:
            out.append(tool)
            continue
        out.append({"type": "function", "name": fn["name"],
                    "parameters": fn.get("parameters") or {"type": "object", "properties": {}},
                    "strict": bool(fn.get("strict", False)),
                    **({"description": fn["description"]} if fn.get("description") else {})})
    return out
