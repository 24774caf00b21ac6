"""OpenAI chat completions through the official SDK, streamed, tool calls reassembled by index.

Works with any OpenAI-compatible server (Ollama, vLLM, llama.cpp) through ``OPENAI_BASE_URL``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from voxqueue.settings import Settings
from workers.agent.providers import Answer, ToolCallRequest
from workers.runtime.openai_client import make_openai, provider_error
from workers.runtime.retry import ProviderError, call_with_retry


class OpenAIChat:
    name = "openai"

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.client = make_openai(settings, "LLM (OpenAI)")

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *,
                 deadline: float, on_text: Callable[[str], None] | None = None) -> Answer:
        s = self.settings
        emitted = False

        def forward(text: str) -> None:
            nonlocal emitted
            emitted = True
            if on_text is not None:
                on_text(text)

        def attempt() -> Answer:
            try:
                return self._stream(messages, tools, deadline, forward)
            except ProviderError as exc:
                if emitted:  # text already went out: a retry would say it twice
                    exc.retryable = False
                raise

        return call_with_retry(attempt, attempts=s.provider_max_attempts,
                               base_s=s.provider_backoff_s, cap_s=s.provider_backoff_max_s,
                               deadline=deadline)

    def _stream(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                deadline: float, on_text: Callable[[str], None]) -> Answer:
        s = self.settings
        kwargs: dict[str, Any] = {
            "model": s.llm_model,
            "messages": messages,
            "stream": True,
            "stream_options": {"include_usage": True},
            "timeout": max(1.0, min(s.provider_timeout_s, deadline - time.time())),
        }
        if tools:
            kwargs["tools"] = tools
        if s.llm_temperature is not None:
            kwargs["temperature"] = s.llm_temperature
        started = time.perf_counter()
        answer = Answer()
        text: list[str] = []
        calls: dict[int, dict[str, str]] = {}
        try:
            stream = self.client.chat.completions.create(**kwargs)
            for chunk in stream:
                if answer.ttfb_ms is None:
                    answer.ttfb_ms = round((time.perf_counter() - started) * 1000, 2)
                if getattr(chunk, "usage", None):
                    answer.usage = chunk.usage.model_dump(exclude_none=True)
                for choice in chunk.choices or []:
                    delta = choice.delta
                    if delta is not None and delta.content:
                        text.append(delta.content)
                        on_text(delta.content)
                    for frag in (delta.tool_calls or []) if delta is not None else []:
                        call = calls.setdefault(frag.index, {"id": "", "name": "", "arguments": ""})
                        if frag.id:
                            call["id"] = frag.id
                        if frag.function is not None:
                            if frag.function.name:
                                call["name"] = frag.function.name
                            if frag.function.arguments:
                                call["arguments"] += frag.function.arguments
                    if choice.finish_reason:
                        answer.finish_reason = choice.finish_reason
        except ProviderError:
            raise
        except Exception as exc:  # SDK errors, including a stream cut mid-answer
            raise provider_error(exc, "the LLM") from exc
        answer.text = "".join(text).strip()
        answer.tool_calls = [
            ToolCallRequest(id=c["id"] or f"call_{i}", name=c["name"], arguments=c["arguments"])
            for i, c in sorted(calls.items())
        ]
        return answer
