"""What the model sees: the session's history, kept within the model's context window.

Before every LLM call the history's tokens are counted with the model's tokenizer (tool
definitions included). Past ``context_threshold`` of the model's window the older turns are
summarized by the chat model (trimmed with the local agent) and the history in Redis is
replaced by: the system prompt, one summary message, the recent turns verbatim.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import structlog

from workers.agent.context.accounting import record_compaction
from workers.agent.context.budget import context_limit
from workers.agent.context.compaction import Compaction, compact
from workers.agent.context.tokens import count_messages, count_tools
from workers.agent.messages import Message

if TYPE_CHECKING:
    from workers.agent.history import History
    from workers.runtime.resources import Runtime
    from workers.runtime.stage import Stage

log = structlog.get_logger("voxqueue.context")

_tools_tokens: dict[tuple[int, int, str], int] = {}


def tools_tokens(rt: Runtime, model_name: str) -> int:
    """Tokens of the tool definitions offered to the model (counted once per process)."""
    schemas = rt.tools.schemas()
    key = (id(rt.tools), len(schemas), model_name)
    if key not in _tools_tokens:
        _tools_tokens[key] = count_tools(schemas, model_name)
    return _tools_tokens[key]


@dataclass(frozen=True)
class Prepared:
    """A step's prompt and its size, to be recorded with the step's answer."""

    messages: list[Message]
    tokens: int
    limit: int


def measure_context(stage: Stage, history: History, messages: list[Message]) -> Prepared:
    """``messages`` (the history as read) counted, and compacted past the threshold; nothing
    is written unless it is compacted (the agent loop records the size with the answer)."""
    rt, settings = stage.rt, stage.rt.settings
    model_name = settings.providers.llm_model
    limit = context_limit(settings, model_name)
    allowed = int(limit * settings.agent.context_threshold)
    tool_tokens = tools_tokens(rt, model_name)
    tokens = count_messages(messages, model_name) + tool_tokens
    if tokens > allowed:
        done = _compact(stage, history, messages, allowed, tool_tokens)
        if done is not None:
            messages, tokens = done.messages, done.after_tokens
    return Prepared(messages, tokens, limit)


def _compact(
    stage: Stage, history: History, messages: list[Message], allowed: int, tool_tokens: int
) -> Compaction | None:
    """Compact, store the shorter history, count it and report it as an event."""
    rt, spec, settings = stage.rt, stage.spec, stage.rt.settings
    chat = rt.chat_model
    result = compact(
        messages,
        model=None if chat.name == "local" else chat,
        model_name=settings.providers.llm_model,
        budget_tokens=allowed,
        tools_tokens=tool_tokens,
        keep_turns=settings.agent.keep_recent_turns,
        deadline=time.time() + max(1.0, stage.remaining() / 2),
    )
    if result is None:
        return None
    stored = history.replace(result.messages, expect_len=len(messages), fence=stage.fence)
    if not stored:  # the history moved meanwhile: use the shorter one for this call only
        log.warning("history changed during compaction; not stored", turn_id=spec.turn_id)
    count = record_compaction(
        rt.redis, rt.keys, spec.session_id, result.mode, settings.turns.session_ttl_s
    )
    stage.emit(
        "context-summarized",
        {
            "mode": result.mode,
            "before_tokens": result.before_tokens,
            "after_tokens": result.after_tokens,
            "summarized_messages": result.folded,
            "count": count,
            "stored": stored,
        },
    )
    return result
