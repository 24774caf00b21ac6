"""What the model sees: the session's history, kept within the model's context window."""

from __future__ import annotations

from typing import TYPE_CHECKING

from workers.agent.messages import Message

if TYPE_CHECKING:
    from workers.agent.history import History
    from workers.runtime.stage import Stage


def prepare_context(stage: Stage, history: History) -> list[Message]:
    """The messages for this step's LLM call (the whole history, compacted when it grows)."""
    return history.load()
