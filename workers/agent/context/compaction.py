"""Keeping a long history inside the context window: fold the older turns into a summary
written by the chat model, or (with no LLM) drop them.

A turn starts at a user message, together with the system notes (monitor alerts) injected just
before it. The history is only ever cut between turns, so an assistant message that asks for
tools always stays with the tool results that answer it. The system prompt stays first, then
one summary message, then the most recent turns verbatim.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import structlog

from workers.agent import messages as msg
from workers.agent.context.tokens import count_messages, count_text, encoding_for
from workers.agent.messages import Message

if TYPE_CHECKING:
    from workers.agent.providers.base import ChatModel

log = structlog.get_logger("voxqueue.context")

SUMMARY_PREFIX = "Summary of the earlier conversation: "
SUMMARIZER_SYSTEM = (
    "You compress conversations for a voice assistant's memory. Answer with the summary only."
)
SUMMARIZE_INSTRUCTION = (
    "Summarize the conversation below in a few short sentences so the assistant can go on "
    "with it. Keep every fact the user stated (names, numbers, codes, dates, preferences), "
    "what was decided and what is still open; drop greetings and small talk."
)
#: A transcript line longer than this (a big tool result) is cut.
MAX_LINE_CHARS = 1000
#: Tokens of the summarization request besides the transcript (instructions, overhead).
REQUEST_OVERHEAD = 200
MIN_CHUNK_TOKENS = 256

Mode = Literal["summary", "trim"]


@dataclass(frozen=True)
class Split:
    """A history cut between turns: the system prompt, what to fold, what stays verbatim."""

    head: list[Message]
    older: list[Message]
    recent: list[Message]


@dataclass(frozen=True)
class Compaction:
    messages: list[Message]
    mode: Mode
    folded: int
    """Messages summarized (or dropped, when trimming)."""
    before_tokens: int
    after_tokens: int


def is_summary(message: Message) -> bool:
    return message.get("role") == "system" and str(message.get("content") or "").startswith(
        SUMMARY_PREFIX
    )


def turn_starts(body: list[Message]) -> list[int]:
    """Where each turn begins: its user message, or the system notes right before it."""
    starts: list[int] = []
    for i, message in enumerate(body):
        if message.get("role") != "user":
            continue
        j = i
        while j > 0 and body[j - 1].get("role") == "system" and not is_summary(body[j - 1]):
            j -= 1
        starts.append(j)
    return starts


def split(messages: list[Message], keep_turns: int) -> Split:
    """Keep the last ``keep_turns`` turns (at least the current one); the rest is older."""
    head_len = (
        1 if messages and messages[0].get("role") == "system" and not is_summary(messages[0]) else 0
    )
    head, body = messages[:head_len], messages[head_len:]
    starts = turn_starts(body)
    if not starts:
        return Split(head, [], body)
    keep = max(1, min(keep_turns, len(starts)))
    cut = starts[-keep]
    return Split(head, body[:cut], body[cut:])


def choose_split(messages: list[Message], keep_turns: int, fits: Callable[[Split], bool]) -> Split:
    """The split keeping the most recent turns (up to ``keep_turns``) that ``fits``."""
    for keep in range(max(1, keep_turns), 0, -1):
        candidate = split(messages, keep)
        if fits(candidate):
            return candidate
    return split(messages, 1)


def transcript(messages: list[Message]) -> list[str]:
    """One readable line per message, for the summarizer."""
    lines: list[str] = []
    for m in messages:
        role = m.get("role")
        content = str(m.get("content") or "").strip()
        if role == "system" and is_summary(m):
            lines.append("Earlier summary: " + content[len(SUMMARY_PREFIX) :])
        elif role == "system":
            lines.append("Note: " + content)
        elif role == "user":
            lines.append("User: " + content)
        elif role == "assistant":
            if content:
                lines.append("Assistant: " + content)
            for call in m.get("tool_calls") or []:
                fn = call.get("function", {})
                lines.append(f"Assistant called {fn.get('name')}({fn.get('arguments')})")
        elif role == "tool":
            lines.append("Tool result: " + content)
    return [line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + "…" for line in lines]


def chunks(lines: list[str], max_tokens: int, model_name: str) -> list[list[str]]:
    """Consecutive lines grouped so each group stays within ``max_tokens``."""
    groups: list[list[str]] = [[]]
    used = 0
    for line in lines:
        size = count_text(line, model_name) + 1
        if groups[-1] and used + size > max_tokens:
            groups.append([])
            used = 0
        groups[-1].append(line)
        used += size
    return [g for g in groups if g]


def summary_request(transcript_lines: list[str], summary_so_far: str) -> list[Message]:
    """The summarization request: its last message is a user message starting with the
    instruction ("Summarize the conversation ...") and holding the transcript."""
    parts = [SUMMARIZE_INSTRUCTION]
    if summary_so_far:
        parts.append("Summary so far: " + summary_so_far)
    parts.append("Conversation:\n" + "\n".join(transcript_lines))
    return [msg.system(SUMMARIZER_SYSTEM), msg.user("\n\n".join(parts))]


def summarize(
    model: ChatModel, older: list[Message], *, model_name: str, chunk_tokens: int, deadline: float
) -> str:
    """A summary of ``older`` by the chat model (no tools), folding long parts chunk by chunk."""
    summary = ""
    for group in chunks(transcript(older), chunk_tokens, model_name):
        answer = model.complete(summary_request(group, summary), [], deadline=deadline)
        summary = answer.text.strip() or summary
    return summary


def clip(text: str, max_tokens: int, model_name: str) -> str:
    """``text`` cut to at most ``max_tokens`` tokens."""
    enc = encoding_for(model_name)
    tokens = enc.encode(text, disallowed_special=())
    return text if len(tokens) <= max_tokens else enc.decode(tokens[:max_tokens]).rstrip() + "…"


def summary_reserve(budget_tokens: int) -> int:
    """Room kept for the summary message."""
    return max(32, min(budget_tokens // 4, 512))


def compact(
    messages: list[Message],
    *,
    model: ChatModel | None,
    model_name: str,
    budget_tokens: int,
    tools_tokens: int,
    keep_turns: int,
    deadline: float,
) -> Compaction | None:
    """A shorter history within ``budget_tokens`` (tools included), or None when no whole
    older turn can be folded. ``model`` None: trim the older turns instead of summarizing;
    a failed summarization trims too (earlier summaries are kept then)."""

    def count(found: list[Message]) -> int:
        return count_messages(found, model_name) + tools_tokens

    reserve = summary_reserve(budget_tokens) if model is not None else 0
    chosen = choose_split(
        messages, keep_turns, lambda s: count(s.head + s.recent) + reserve <= budget_tokens
    )
    if not any(not is_summary(m) for m in chosen.older):
        return None
    before = count(messages)
    text = ""
    if model is not None:
        try:
            text = summarize(
                model,
                chosen.older,
                model_name=model_name,
                deadline=deadline,
                chunk_tokens=max(MIN_CHUNK_TOKENS, budget_tokens - reserve - REQUEST_OVERHEAD),
            )
        except Exception as exc:  # a failed summary must not fail the turn: trim instead
            log.warning("summarization failed; trimming instead", error=str(exc))
    if text:
        summary = msg.system(SUMMARY_PREFIX + clip(text, reserve, model_name))
        kept = [*chosen.head, summary, *chosen.recent]
        mode: Mode = "summary"
    else:
        earlier = [m for m in chosen.older if is_summary(m)]
        kept = [*chosen.head, *earlier, *chosen.recent]
        mode = "trim"
    return Compaction(kept, mode, len(chosen.older), before, count(kept))
