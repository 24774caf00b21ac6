"""The offline agent: the user's sentence is matched against the tools' example sentences,
the matching tools are called directly, and their results are spoken — no LLM.

It speaks the agent loop's language (OpenAI-shaped history, ``Answer`` with tool calls): the
first step answers the user's message with tool calls (ids ``local_...``); the step after the
tools answers their results through each tool's ``response`` template. When the best
interpretation of a sentence fails, the next one is tried ("what is the capital of France"
may be a Home Assistant entity or arithmetic before it is nothing). A sentence it does not
understand gets a short reply saying so and naming a few things it can do.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from voxqueue.settings import Settings
from workers.agent.providers.base import Answer, ToolCallRequest
from workers.intents import IntentCall, matcher_for
from workers.intents.responses import apology, offline_reply, render_result
from workers.tool_registry.registry import ToolRegistry

LOCAL_PREFIX = "local_"

#: Interpretations of one sentence tried before giving up.
MAX_ATTEMPTS = 3

#: When every interpretation failed and the best one's arguments took more than this share of
#: the sentence, a template's wildcard swallowed a question it was never meant for ("what is
#: the capital of France" as arithmetic): the offline reply fits better than the tool's error.
SWALLOWED = 0.6


@dataclass(frozen=True)
class _Result:
    call_id: str
    name: str
    arguments: dict[str, Any]
    content: str
    say: str | None = None

    @property
    def ok(self) -> bool:
        return not self.content.startswith("Error")


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def _offered(tools: list[dict[str, Any]]) -> set[str]:
    return {t.get("function", {}).get("name", "") for t in tools}


def _results_since_user(messages: list[dict[str, Any]]) -> tuple[str, list[list[_Result]]]:
    """The last user message and, after it, each round of tool calls with their results."""
    start = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    user = _text(messages[start]) if start >= 0 else ""
    rounds: list[list[_Result]] = []
    answers = {m.get("tool_call_id"): m for m in messages[start + 1 :] if m.get("role") == "tool"}
    for m in messages[start + 1 :]:
        if m.get("role") != "assistant" or not m.get("tool_calls"):
            continue
        round_: list[_Result] = []
        for call in m["tool_calls"]:
            fn = call.get("function", {})
            try:
                arguments = json.loads(fn.get("arguments") or "{}")
            except json.JSONDecodeError:
                arguments = {}
            round_.append(
                _Result(
                    call.get("id", ""),
                    fn.get("name", ""),
                    arguments if isinstance(arguments, dict) else {},
                    _text(answers.get(call.get("id")) or {}),
                    (answers.get(call.get("id")) or {}).get("say"),
                )
            )
        rounds.append(round_)
    return user, rounds


def ends_with_local_results(messages: list[dict[str, Any]]) -> bool:
    """True when the history ends with the results of tool calls this agent made."""
    if not messages or messages[-1].get("role") != "tool":
        return False
    _, rounds = _results_since_user(messages)
    return bool(rounds) and all(r.call_id.startswith(LOCAL_PREFIX) for r in rounds[-1])


class LocalIntents:
    """A ChatModel that needs no model: hassil intents from the tools' example sentences."""

    name = "local"

    def __init__(self, settings: Settings, tools: ToolRegistry) -> None:
        self.settings = settings
        self.registry = tools
        self.matcher = matcher_for(tools)
        self._replies: dict[frozenset[str], str] = {}

    # -- the ChatModel protocol -------------------------------------------------------------
    def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        *,
        deadline: float,
        on_text: Callable[[str], None] | None = None,
    ) -> Answer:
        started = time.perf_counter()
        answer = self._answer(messages, _offered(tools))
        answer.ttfb_ms = round((time.perf_counter() - started) * 1000, 2)
        if answer.text and on_text is not None:
            on_text(answer.text)
        return answer

    def handles(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> bool:
        """Whether to answer locally rather than ask an LLM: the user's message matches, or
        the history ends with this agent's tool results that worked (or have a next try)."""
        allowed = _offered(tools)
        if not messages:
            return False
        if messages[-1].get("role") == "user":
            return bool(self.matcher.match(_text(messages[-1]), allowed))
        if not ends_with_local_results(messages):
            return False
        user, rounds = _results_since_user(messages)
        return all(r.ok for r in rounds[-1]) or self._next_try(user, rounds, allowed) is not None

    # -- answers ----------------------------------------------------------------------------
    def _answer(self, messages: list[dict[str, Any]], allowed: set[str]) -> Answer:
        last = messages[-1] if messages else {}
        if last.get("role") == "tool":
            return self._after_tools(messages, allowed)
        if last.get("role") == "user":
            calls = self.matcher.match(_text(last), allowed)
            if calls:
                return _calls(calls)
        return Answer(text=self._offline_reply(allowed), finish_reason="stop")

    def _after_tools(self, messages: list[dict[str, Any]], allowed: set[str]) -> Answer:
        user, rounds = _results_since_user(messages)
        if not rounds:
            return Answer(text=self._offline_reply(allowed), finish_reason="stop")
        latest = rounds[-1]
        if not all(r.ok for r in latest):
            retry = self._next_try(user, rounds, allowed)
            if retry is not None:
                return _calls([retry])
        if len(latest) == 1 and not latest[0].ok:
            best = rounds[0][0]
            if _share_of(best.arguments, user) > SWALLOWED:
                return Answer(text=self._offline_reply(allowed), finish_reason="stop")
            # Every interpretation failed: the best one's error says most.
            return Answer(text=apology(best.content, self._service(best.name)),
                          finish_reason="stop")
        parts = [
            (r.say or render_result(self.registry.get(r.name), r.arguments, r.content))
            if r.ok
            else apology(r.content, self._service(r.name))
            for r in latest
        ]
        return Answer(text=" ".join(p for p in parts if p), finish_reason="stop")

    def _service(self, tool: str) -> str | None:
        found = self.registry.get(tool)
        return found.service if found is not None else None

    def _next_try(
        self, user: str, rounds: list[list[_Result]], allowed: set[str]
    ) -> IntentCall | None:
        """The next interpretation of a single-request sentence whose calls so far failed."""
        if len(rounds) >= MAX_ATTEMPTS or any(len(r) != 1 for r in rounds):
            return None
        tried = {
            (r.name, json.dumps(r.arguments, sort_keys=True)) for round_ in rounds for r in round_
        }
        for call in self.matcher.candidates(user, allowed):
            if (call.tool, json.dumps(call.arguments, sort_keys=True)) not in tried:
                return call
        return None

    def _offline_reply(self, allowed: set[str]) -> str:
        key = frozenset(allowed)
        if key not in self._replies:
            self._replies[key] = offline_reply(self.matcher, allowed)
        return self._replies[key]


def _share_of(arguments: dict[str, Any], sentence: str) -> float:
    """How much of the sentence the call's text arguments took."""
    taken = sum(len(v) for v in arguments.values() if isinstance(v, str))
    return taken / max(1, len(sentence.strip()))


def _calls(calls: list[IntentCall]) -> Answer:
    return Answer(
        tool_calls=[
            ToolCallRequest(
                id=f"{LOCAL_PREFIX}{uuid.uuid4().hex[:16]}",
                name=c.tool,
                arguments=json.dumps(c.arguments, ensure_ascii=False),
            )
            for c in calls
        ],
        finish_reason="tool_calls",
    )
