"""Cutting a history between turns, summarizing the older part, trimming without an LLM."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from workers.agent import messages as msg
from workers.agent.context.compaction import (
    SUMMARY_PREFIX,
    clip,
    compact,
    is_summary,
    split,
    transcript,
    turn_starts,
)
from workers.agent.context.tokens import count_messages, count_text
from workers.agent.providers.base import Answer
from workers.runtime.retry import ProviderError

MODEL = "gpt-4o-mini"


class ScriptedChat:
    """A stand-in for the LLM provider: answers every request with ``reply``."""

    name = "openai"

    def __init__(self, reply: str = "The user's locker code is 4711.", fail: bool = False) -> None:
        self.reply = reply
        self.fail = fail
        self.requests: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]] = []

    def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        *,
        deadline: float,
        on_text: Callable[[str], None] | None = None,
    ) -> Answer:
        self.requests.append((messages, tools))
        if self.fail:
            raise ProviderError("the LLM answered 500", status=500)
        return Answer(text=self.reply)


def tool_turn(n: int) -> list[dict[str, Any]]:
    call = {"id": f"c{n}", "name": "get_current_time", "arguments": '{"timezone": "UTC"}'}
    return [
        msg.user(f"what time is it, question {n}"),
        msg.assistant_tool_calls([call]),
        msg.tool_result(f"c{n}", f"It is {n}:00."),
        msg.assistant(f"It is {n} o'clock."),
    ]


def chat_turn(n: int) -> list[dict[str, Any]]:
    return [msg.user(f"filler message number {n}"), msg.assistant(f"You said: filler {n}")]


def history(turns: int) -> list[dict[str, Any]]:
    found = [
        msg.system("You are a voice assistant."),
        msg.user("my locker code is 4711"),
        msg.assistant("Noted."),
    ]
    for n in range(turns):
        found += tool_turn(n) if n % 3 == 0 else chat_turn(n)
    return found


def run_compact(messages: list[dict[str, Any]], model: ScriptedChat | None, budget_tokens: int,
                tools_tokens: int = 0, keep_turns: int = 4) -> Any:
    """``compact`` with this file's model name, no deadline pressure and four kept turns."""
    return compact(messages, model=model, model_name=MODEL, budget_tokens=budget_tokens,
                   tools_tokens=tools_tokens, keep_turns=keep_turns, deadline=1e12)


def test_a_turn_starts_at_its_user_message_or_the_alerts_before_it():
    body = [
        msg.user("a"),
        msg.assistant("b"),
        msg.system("Monitor alert: x"),
        msg.system("Monitor alert: y"),
        msg.user("c"),
        msg.assistant("d"),
    ]
    assert turn_starts(body) == [0, 2]
    # A summary at the start is not part of the first turn.
    assert turn_starts([msg.system(SUMMARY_PREFIX + "s"), msg.user("a")]) == [1]


def test_split_never_separates_tool_calls_from_their_results():
    messages = history(12)
    for keep in range(1, 8):
        parts = split(messages, keep)
        assert parts.head == messages[:1]
        assert parts.head + parts.older + parts.recent == messages
        assert parts.recent[0]["role"] == "user"
        asked = {c["id"] for m in parts.recent for c in m.get("tool_calls") or []}
        answered = {m["tool_call_id"] for m in parts.recent if m["role"] == "tool"}
        assert asked == answered
        assert sum(m["role"] == "user" for m in parts.recent) == keep


def test_the_current_turn_always_stays_even_when_keep_is_zero():
    messages = history(3)
    assert split(messages, 0).recent == messages[-2:]


def test_compaction_summarizes_the_older_turns_and_keeps_the_recent_ones():
    messages = history(30)
    chat = ScriptedChat()
    before = count_messages(messages, MODEL)
    result = run_compact(messages, chat, 400)
    assert result is not None and result.mode == "summary"
    assert result.before_tokens == before and result.after_tokens <= 400
    assert result.messages[0] == messages[0]
    summary = result.messages[1]
    assert is_summary(summary) and "4711" in summary["content"]
    assert result.messages[2:] == messages[-len(result.messages) + 2 :]
    assert result.folded == len(messages) - len(result.messages) + 1
    # The summarizer got the old facts, with no tools, its request ending on a user message
    # that asks to summarize the conversation.
    request, tools = chat.requests[0]
    assert tools == []
    assert request[-1]["role"] == "user"
    assert request[-1]["content"].startswith("Summarize the conversation")
    assert "User: my locker code is 4711" in request[-1]["content"]


def test_a_second_compaction_folds_the_earlier_summary_in():
    chat = ScriptedChat()
    first = run_compact(history(30), chat, 400)
    assert first is not None
    grown = first.messages + [m for n in range(40, 60) for m in chat_turn(n)]
    second = run_compact(grown, chat, 400)
    assert second is not None
    assert sum(is_summary(m) for m in second.messages) == 1
    asked = [request[-1]["content"] for request, _ in chat.requests[1:]]
    assert any("Earlier summary: The user's locker code is 4711." in a for a in asked)


def test_a_long_older_part_is_summarized_chunk_by_chunk():
    messages = history(200)
    chat = ScriptedChat()
    result = run_compact(messages, chat, 600)
    assert result is not None and len(chat.requests) > 1
    for request, _ in chat.requests:
        assert count_messages(request, MODEL) < 600
    # Each later chunk carries the summary so far.
    assert "Summary so far: " in chat.requests[1][0][-1]["content"]


def test_tool_definitions_count_against_the_budget():
    messages = history(30)
    roomy = run_compact(messages, ScriptedChat(), 600)
    tight = run_compact(messages, ScriptedChat(), 600, tools_tokens=350)
    assert roomy is not None and tight is not None
    assert len(tight.messages) < len(roomy.messages)
    assert tight.after_tokens <= 600


def test_without_an_llm_the_oldest_turns_are_trimmed():
    messages = history(30)
    result = run_compact(messages, None, 300)
    assert result is not None and result.mode == "trim"
    assert result.messages[0] == messages[0]
    assert result.messages[1:] == messages[-(len(result.messages) - 1) :]
    assert result.messages[1]["role"] == "user"
    assert result.after_tokens <= 300


def test_a_failed_summary_trims_but_keeps_earlier_summaries():
    earlier = msg.system(SUMMARY_PREFIX + "The user's locker code is 4711.")
    messages = [history(0)[0], earlier, *[m for n in range(40) for m in chat_turn(n)]]
    result = run_compact(messages, ScriptedChat(fail=True), 300)
    assert result is not None and result.mode == "trim"
    assert result.messages[1] == earlier


def test_nothing_to_fold_gives_none():
    messages = history(2)
    assert run_compact(messages, ScriptedChat(), 10, keep_turns=1) is not None
    only_current = [messages[0], msg.user("x " * 500)]
    assert run_compact(only_current, ScriptedChat(), 10) is None


def test_transcript_and_clip():
    lines = transcript([*tool_turn(1), msg.system("Monitor alert: disk full")])
    assert lines[0] == "User: what time is it, question 1"
    assert lines[1].startswith("Assistant called get_current_time(")
    assert lines[2] == "Tool result: It is 1:00."
    assert lines[-1] == "Note: Monitor alert: disk full"
    long = "word " * 1000
    assert count_text(clip(long, 50, MODEL), MODEL) <= 51
    assert clip("short", 50, MODEL) == "short"
