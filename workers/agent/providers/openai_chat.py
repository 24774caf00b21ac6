"""OpenAI chat completions through the official SDK, streamed, tool calls reassembled by index.

Works with any OpenAI-compatible server (Ollama, vLLM, llama.cpp) through ``OPENAI_BASE_URL``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from workers.agent.messages import for_model
from workers.agent.providers.base import Answer, ToolCallRequest
from workers.agent.providers.openai_streamed import OpenAIStreamed
from workers.runtime.retry import ProviderError


class OpenAIChat(OpenAIStreamed):
    name = "openai"

    def _stream(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                deadline: float, on_text: Callable[[str], None]) -> Answer:
        body: dict[str, Any] = {
            "model": self.settings.providers.llm_model,
            "messages": for_model(messages),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if tools:
            body["tools"] = tools
        answer = Answer()
        text: list[str] = []
        calls: dict[int, dict[str, str]] = {}
        self._post("/chat/completions", body, deadline, answer,
                   lambda chunk: _apply_chunk(chunk, answer, text, calls, on_text))
        answer.text = "".join(text).strip()
        answer.tool_calls = [
            ToolCallRequest(id=c["id"] or f"call_{i}", name=c["name"], arguments=c["arguments"])
            for i, c in sorted(calls.items())
        ]
        return answer


def _apply_chunk(chunk: Any, answer: Answer, text: list[str], calls: dict[int, dict[str, str]],
                 on_text: Callable[[str], None]) -> None:
    """Fold one ``chat.completion.chunk`` into the answer: text, tool-call fragments, usage.

    Tool-call fragments are reassembled by index: ids and names kept, arguments concatenated.
    """
    if not isinstance(chunk, dict):
        raise ProviderError(f"the LLM sent a malformed chunk: {str(chunk)[:80]!r}")
    usage = chunk.get("usage")
    if isinstance(usage, dict) and usage:
        answer.usage = {k: v for k, v in usage.items() if v is not None}
    for choice in chunk.get("choices") or []:
        if not isinstance(choice, dict):
            raise ProviderError(f"the LLM sent a malformed choice: {str(choice)[:80]!r}")
        delta = choice.get("delta") or {}
        if not isinstance(delta, dict):
            raise ProviderError(f"the LLM sent a malformed delta: {str(delta)[:80]!r}")
        content = delta.get("content")
        if isinstance(content, str) and content:
            text.append(content)
            on_text(content)
        for frag in delta.get("tool_calls") or []:
            index = frag.get("index") if isinstance(frag, dict) else None
            if not isinstance(index, int):
                raise ProviderError(f"the LLM sent a malformed tool call: {str(frag)[:80]!r}")
            call = calls.setdefault(index, {"id": "", "name": "", "arguments": ""})
            if frag.get("id"):
                call["id"] = str(frag["id"])
            function = frag.get("function") or {}
            if function.get("name"):
                call["name"] = str(function["name"])
            if function.get("arguments"):
                call["arguments"] += str(function["arguments"])
        if choice.get("finish_reason"):
            answer.finish_reason = str(choice["finish_reason"])
