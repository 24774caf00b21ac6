"""Local intents first, an LLM for the rest (Home Assistant's "prefer handling commands
locally"): a sentence the tools' examples match is answered in milliseconds with no LLM call;
anything else, and a local call that failed with no other interpretation, goes to the LLM,
which then sees the whole history (local calls and their results included)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from workers.agent.providers.base import Answer, ChatModel
from workers.agent.providers.local_intents import LocalIntents


class PreferLocal:
    def __init__(self, local: LocalIntents, remote: ChatModel) -> None:
        self.local = local
        self.remote = remote
        self.name = f"{local.name}+{remote.name}"

    def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        *,
        deadline: float,
        on_text: Callable[[str], None] | None = None,
    ) -> Answer:
        model: ChatModel = self.local if self.local.handles(messages, tools) else self.remote
        return model.complete(messages, tools, deadline=deadline, on_text=on_text)
