"""What both OpenAI model providers share (Chat Completions and Responses): the SDK client, our
retries around a streamed call, and one streamed POST through the SDK's own request path (auth,
base URL, errors, SSE decoding) with its events left as JSON: building the SDK's typed models
for every event cost several times the CPU of everything else in a call here."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from voxqueue.settings import Settings
from workers.agent.providers.base import Answer, StreamStopped
from workers.runtime.openai_client import make_openai, provider_error
from workers.runtime.retry import ProviderError, call_with_retry


class OpenAIStreamed:
    """An OpenAI provider: ``_stream`` builds one request and folds its events into an Answer
    (through ``_post``); ``complete`` runs it with our retries and deadline."""

    def __init__(self, settings: Settings) -> None:
        import openai

        self.settings = settings
        self.client = make_openai(settings, "LLM (OpenAI)")
        self._events = openai.Stream[object]  # the SDK's SSE stream, events left as JSON

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *,
                 deadline: float, on_text: Callable[[str], None] | None = None) -> Answer:
        return stream_with_retry(
            self.settings, deadline, on_text,
            lambda forward: self._stream(messages, tools, deadline, forward))

    def _stream(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                deadline: float, on_text: Callable[[str], None]) -> Answer:
        raise NotImplementedError

    def _post(self, path: str, body: dict[str, Any], deadline: float, answer: Answer,
              apply: Callable[[Any], None]) -> None:
        """POST ``body`` (with the settings' temperature) to ``path``, streamed, giving each
        event to ``apply``; the first event's time goes in ``answer.ttfb_ms``. SDK errors,
        a stream cut mid-answer included, become ``ProviderError``."""
        p = self.settings.providers
        if p.llm_temperature is not None:
            body["temperature"] = p.llm_temperature
        timeout = max(1.0, min(p.timeout_s, deadline - time.time()))
        started = time.perf_counter()
        try:
            stream = self.client.post(path, body=body, cast_to=object, stream=True,
                                      stream_cls=self._events, options={"timeout": timeout})
            for event in stream:
                if answer.ttfb_ms is None:
                    answer.ttfb_ms = round((time.perf_counter() - started) * 1000, 2)
                apply(event)
        except (ProviderError, StreamStopped):
            raise
        except Exception as exc:  # SDK errors, including a stream cut mid-answer
            raise provider_error(exc, "the LLM") from exc


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
