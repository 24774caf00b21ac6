"""Taint and the spoken yes: once a session's history holds text others wrote, its side
effects run only after the person confirms them, and the system itself asks.

A tool with ``reads_untrusted`` (web pages, feeds, Wikipedia, MCP results, Home Assistant
state) and a monitor alert taint the turn (``vq:turn:<id>:untrusted``) and its session
(``vq:session:<id>:untrusted``, kept as long as the history: ``workers.agent.history``). In a
tainted turn a side-effecting tool does not run: the call is refused as
``needs-confirmation``, and the agent (``workers.agent.confirmation``) parks the first such
call of the answer, asks the person its question itself ("Unlock the front door?") as the
turn's reply, and runs exactly that call when the same device's next turn is a plain yes.

In that confirming turn the guard lets only the system's own call of the confirmed action
run; any other side effect of a tainted turn is refused and not parked, and the same action
again is refused whatever the taint.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import redis
from pydantic import ValidationError

from voxqueue.contracts.confirm import PendingAction
from voxqueue.keys import Keys
from voxqueue.settings import Settings
from workers.tool_registry.confirm import (
    CONFIRMED_FIELD,
    NEEDS_CONFIRMATION,
    NOT_CONFIRMED,
    question_for,
)
from workers.tool_registry.context import ToolCall
from workers.tool_registry.policy import action_key
from workers.tool_registry.registry import Tool
from workers.tool_registry.taint import taint_writes


@dataclass(frozen=True)
class TurnFacts:
    """What the guard knows of the call's turn."""

    text: str | None
    """The person's words this turn; None when the turn is unknown."""
    tainted: bool
    confirmed: PendingAction | None = None
    """The action this turn's yes confirmed (its ``call_id`` is the system's own call)."""


@dataclass(frozen=True)
class Refusal:
    code: str
    message: str


def confirmation_needed(tool: str, arguments: dict[str, Any]) -> str:
    """What the model is told instead of a result when the action waits for a yes."""
    return (f"Not done: {tool} needs the person's spoken confirmation, and the system asks "
            f"them itself (\"{question_for(tool, arguments)}\"); do not ask. It runs only if "
            "their next turn is a yes.")


class TurnGuard:
    """Reads and writes a turn's taint; decides whether a side effect may run now."""

    def __init__(self, r: redis.Redis, keys: Keys, settings: Settings) -> None:
        self.r = r
        self.keys = keys
        self.settings = settings

    def facts(self, call: ToolCall) -> TurnFacts:
        """The person's words this turn, whether the turn (or its session) is tainted, and
        the action its yes confirmed."""
        pipe = self.r.pipeline(transaction=False)
        pipe.hmget(self.keys.turn(call.turn_id), ["spec", "transcript", CONFIRMED_FIELD])
        pipe.exists(self.keys.turn_untrusted(call.turn_id),
                    self.keys.session_untrusted(call.session_id))
        (spec_raw, transcript, confirmed), tainted = pipe.execute()
        text: str | None = None
        if spec_raw is not None:
            spec = json.loads(spec_raw)
            if spec.get("input") == "text":
                text = str(spec.get("text") or "")
            else:
                text = transcript.decode() if isinstance(transcript, bytes) else (transcript or "")
        action = PendingAction.model_validate_json(confirmed) if confirmed else None
        return TurnFacts(text=text, tainted=bool(tainted), confirmed=action)

    def taint(self, call: ToolCall, reason: str) -> None:
        """Mark the call's turn and session as having read untrusted content."""
        pipe = self.r.pipeline(transaction=True)
        for command in taint_writes(self.keys, self.settings, call.turn_id, call.session_id,
                                    reason):
            pipe.execute_command(*command)
        pipe.execute()

    @staticmethod
    def admit(call: ToolCall, facts: TurnFacts, tool: Tool,
              arguments: dict[str, Any]) -> Refusal | None:
        """None when the side effect may run now; else why not (``needs-confirmation``: the
        agent asks the person about it)."""
        confirmed = facts.confirmed
        if confirmed is not None:
            if call.call_id == confirmed.call_id and tool.name == confirmed.name:
                return None  # the system's own run of what the person confirmed
            if tool.name == confirmed.name and action_key(tool.name, arguments) == action_key(
                    tool.name, _validated(tool, confirmed.arguments)):
                return Refusal(NOT_CONFIRMED, f"Not run again: the person confirmed {tool.name} "
                               "once and it was run once, in this turn. Do not repeat it.")
            if facts.tainted:
                return Refusal(NOT_CONFIRMED, f"Not done: in this turn the person confirmed "
                               f"only \"{confirmed.question}\"; {tool.name} needs its own "
                               "confirmation in a later turn.")
            return None
        if not facts.tainted:
            return None
        return Refusal(NEEDS_CONFIRMATION, confirmation_needed(tool.name, arguments))


def _validated(tool: Tool, raw: str) -> dict[str, Any]:
    """A stored call's arguments as the tool reads them (defaults filled in)."""
    try:
        parsed = json.loads(raw) if raw.strip() else {}
        return dict(tool.args_model.model_validate(parsed).model_dump(mode="json", by_alias=True))
    except (ValueError, ValidationError, TypeError):
        return {"raw": raw}
