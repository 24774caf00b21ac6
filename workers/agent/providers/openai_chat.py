"""OpenAI chat completions through the official SDK, streamed, tool calls reassembled by index.

Works with any OpenAI-compatible server (Ollama, vLLM, llama.cpp) through ``OPENAI_BASE_URL``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from voxqueue.settings import Settings
from workers.agent.messages import for_model
from workers.agent.providers.base import Answer, StreamStopped, ToolCallRequest
from workers.runtime.openai_client import make_openai, provider_error
from workers.runtime.retry import ProviderError, call_with_retry


class OpenAIChat:
    name = "openai"

    def __init__(self, settings: Settings) -> None:
        import openai

        self.settings = settings
        self.client = make_openai(settings, "LLM (OpenAI)")
        self._chunks = openai.Stream[object]  # the SDK's SSE stream, chunks left as JSON

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *,
                 deadline: float, on_text: Callable[[str], None] | None = None) -> Answer:
        return stream_with_retry(
            self.settings, deadline, on_text,
            lambda forward: self._stream(messages, tools, deadline, forward))

    def _stream(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                deadline: float, on_text: Callable[[str], None]) -> Answer:
        s = self.settings
        body: dict[str, Any] = {
            "model": s.providers.llm_model,
            "messages": for_model(messages),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if tools:
            body["tools"] = tools
        if s.providers.llm_temperature is not None:
            body["temperature"] = s.providers.llm_temperature
        timeout = max(1.0, min(s.providers.timeout_s, deadline - time.time()))
        started = time.perf_counter()
        answer = Answer()
        text: list[str] = []
        calls: dict[int, dict[str, str]] = {}
        try:
            # The SDK's own request path (auth, errors, SSE decoding), with chunks left as JSON
            # objects: building typed models for every chunk and walking the request's types
            # cost ~10 ms of CPU per call here, several times more than everything else.
            stream = self.client.post(
                "/chat/completions", body=body, cast_to=object, stream=True,
                stream_cls=self._chunks, options={"timeout": timeout})
            for chunk in stream:
                if answer.ttfb_ms is None:
                    answer.ttfb_ms = round((time.perf_counter() - started) * 1000, 2)
                _apply_chunk(chunk, answer, text, calls, on_text)
        except (ProviderError, StreamStopped):
            raise
        except Exception as exc:  # SDK errors, including a stream cut mid-answer
            raise provider_error(exc, "the LLM") from exc
        answer.text = "".join(text).strip()
        answer.tool_calls = [
            ToolCallRequest(id=c["id"] or f"call_{i}", name=c["name"], arguments=c["arguments"])
            for i, c in sorted(calls.items())
        ]
        return answer


def stream_with_retry(settings: Settings, deadline: float, on_text: Callable[[str], None] | None,
                      stream: Callable[[Callable[[str], None]], Answer]) -> Answer:
    """One streamed model call (``stream(forward)``) with our retries and deadline; once any
    text went out through ``forward`` a failure is final (a retry would say it twice)."""
    p = settings.providers
    emitted = False

    def forward(text: str) -> None:
        nonlocal emitted
        emitted = True
        if on_text is not None:
            on_text(text)

    def attempt() -> Answer:
        try:
            return stream(forward)
        except ProviderError as exc:
            if emitted:
                exc.retryable = False
            raise

    return call_with_retry(attempt, attempts=p.max_attempts, base_s=p.backoff_s,
                           cap_s=p.backoff_max_s, deadline=deadline)


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
