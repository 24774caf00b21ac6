"""The system asks, the person answers: a side effect the guard held back
(``workers.tools.guard``) is asked about by the system itself, one action per question, and
run by the system itself when the same device's next turn is a plain yes.

Asking (``ask``, in the step after the tools): the first held-back call of the answer, in call
order, becomes the session's one pending action (``PendingAction``: tool and raw arguments,
the asking turn and device, ``VOXQUEUE_CONFIRM_TTL_S``), and its question ("Unlock the front
door?", ``workers.tool_registry.confirm``) is the turn's reply in place of the model's: spoken,
shown and kept in the history. The other held-back calls are told they need their own
confirmation later.

Answering (``take``, at the opening of every turn of the session): the pending action is taken
atomically by the session's next turn, whatever it says, so it is answered once. It counts as
confirmed only when that turn's words are a plain yes (``workers.tool_registry.policy.is_yes``), it
comes from the device that heard the question, it was begun after the question was put, and
the asking turn ended ``ok`` (the question was played). The confirming turn then runs exactly
that call, as a step the system answered itself (``confirmed_answer``): a normal tool run (its
claim, its join), its result given to the model to phrase. Anything else drops it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from voxqueue.contracts import ToolOutcome
from voxqueue.contracts.confirm import PendingAction
from voxqueue.once import Once
from workers.agent import messages as msg
from workers.runtime.stage import Stage
from workers.tool_registry.confirm import CONFIRMED_FIELD, NEEDS_CONFIRMATION, question_for
from workers.tool_registry.policy import is_yes

# KEYS: the session's pending action, this turn's hash, the asking turn's end flag.
# ARGV: the field, the pending action as read, 1 if this turn's words are a yes, this turn's
# device, now, this turn's id, the confirmed action as this turn records it.
# Returns what the turn confirmed ('' for nothing). The first call per turn decides and records
# it; a pending action asked by this very turn is left alone.
_TAKE = """
local done = redis.call('HGET', KEYS[2], ARGV[1])
if done then return done end
local raw = redis.call('GET', KEYS[1])
if not raw then
  redis.call('HSET', KEYS[2], ARGV[1], '')
  return ''
end
local ok, entry = pcall(cjson.decode, raw)
if ok and type(entry) == 'table' and entry.turn_id == ARGV[6] then return '' end
redis.call('DEL', KEYS[1])
local out = ''
if ok and type(entry) == 'table' and raw == ARGV[2] and ARGV[3] == '1'
    and entry.device == ARGV[4] and tonumber(entry.expires) >= tonumber(ARGV[5])
    and redis.call('GET', KEYS[3]) == 'ok' then
  out = ARGV[7]
end
redis.call('HSET', KEYS[2], ARGV[1], out)
return out
"""


def system_call_id(turn_id: str) -> str:
    """The id of the call the system makes in a confirming turn."""
    return f"confirmed_{turn_id[:20]}"


def take(stage: Stage, text: str, pending: bytes | None, recorded: bytes | None,
         reopened: bool, *, clock: Callable[[], float] = time.time) -> PendingAction | None:
    """The action this turn confirmed, if any (taking the session's pending action: see the
    module). ``pending`` and ``recorded`` are what the opening read (the session's pending
    action, this turn's decision); ``reopened``: an earlier attempt opened the turn;
    ``clock``: the wall clock a pending action's expiry is judged by."""
    if recorded is not None:
        return PendingAction.model_validate_json(recorded) if recorded else None
    if reopened or not pending:
        return None
    rt, spec = stage.rt, stage.spec
    try:
        entry = PendingAction.model_validate_json(pending)
    except ValidationError:  # not ours to read: dropped, never run
        entry = None
    confirmed = "" if entry is None else entry.model_copy(
        update={"call_id": system_call_id(spec.turn_id)}).model_dump_json()
    asked_by = entry.turn_id if entry is not None else spec.turn_id
    # A yes answers the question only when said after it: not by a turn begun before it.
    answers = entry is not None and spec.created_at > entry.asked_at and is_yes(text)
    out = rt.redis.eval(_TAKE, 3, rt.keys.pending_action(spec.session_id),
                        rt.keys.turn(spec.turn_id), rt.keys.ended(asked_by),
                        CONFIRMED_FIELD, pending, "1" if answers else "0",
                        spec.device or "", repr(clock()), spec.turn_id, confirmed)
    taken = out.decode() if isinstance(out, bytes) else str(out or "")
    if entry is not None:
        stage.log.info("pending action answered", tool=entry.name, confirmed=bool(taken))
    return PendingAction.model_validate_json(taken) if taken else None


def confirmed_answer(action: PendingAction) -> bytes:
    """Step 1 of a confirming turn, answered by the system: the confirmed call, verbatim."""
    call = {"id": action.call_id, "name": action.name, "arguments": action.arguments}
    return json.dumps({"text": "", "calls": [call], "sentences": [],
                       "confirmed": action.question}).encode()


@dataclass(frozen=True)
class Asked:
    """The question a step asks in place of the model's reply."""

    action: PendingAction
    held: frozenset[str]
    """Every held-back call of the answer (the asked one included)."""

    def answer(self) -> bytes:
        """The step's answer, as if stored by the model: the question, spoken."""
        q = self.action.question
        return json.dumps({"text": q, "calls": [], "sentences": [q], "asks": True}).encode()

    def message(self, call_id: str, name: str) -> msg.Message:
        """The tool message a held-back call leaves in the history."""
        if call_id == self.action.call_id:
            return msg.tool_error(call_id, f"Not done yet: the system asked the person "
                                  f"\"{self.action.question}\" as this turn's reply. It runs "
                                  "only if their next turn is a yes (the system then runs it "
                                  "and gives you its result).")
        return msg.tool_error(call_id, f"Not done: one action is confirmed at a time; {name} "
                              "needs its own confirmation in a later turn.")

    def write_in(self, once: Once, stage: Stage, step: int) -> Once:
        """The pending action and the step's answer, written with ``once``."""
        rt = stage.rt
        return (once.call("SET", rt.keys.pending_action(self.action.session_id),
                          self.action.model_dump_json(), "EX", rt.settings.tools.confirm_ttl_s)
                .call("HSET", rt.keys.turn(stage.turn_id), f"answer:{step}", self.answer()))


def ask(stage: Stage, calls: Sequence[Mapping[str, Any]], ran: Mapping[str, ToolOutcome], *,
        clock: Callable[[], float] = time.time) -> Asked | None:
    """The question for the first call of ``calls`` (the answer's, in order) that the guard
    held back, asked at ``clock()`` (a wall clock); None when none was."""
    held = [c for c in calls if (o := ran.get(str(c.get("id")))) is not None
            and o.error_code == NEEDS_CONFIRMATION]
    if not held:
        return None
    rt, spec, first = stage.rt, stage.spec, held[0]
    name, raw = str(first.get("name")), str(first.get("arguments") or "")
    asked_at = clock()
    action = PendingAction(
        turn_id=spec.turn_id, session_id=spec.session_id, device=spec.device or "",
        call_id=str(first.get("id")), name=name, arguments=raw,
        question=question_for(name, _arguments(stage, name, raw)), asked_at=asked_at,
        expires=asked_at + rt.settings.tools.confirm_ttl_s)
    return Asked(action, frozenset(str(c.get("id")) for c in held))


def _arguments(stage: Stage, name: str, raw: str) -> dict[str, Any]:
    """The call's arguments as the tool reads them (defaults filled in), for its question."""
    try:
        parsed = json.loads(raw) if raw.strip() else {}
    except ValueError:
        return {"arguments": raw}
    if not isinstance(parsed, dict):
        return {"arguments": raw}
    try:
        tool = stage.rt.tools.get(name)
        if tool is not None:
            return dict(tool.args_model.model_validate(parsed).model_dump(mode="json",
                                                                           by_alias=True))
    except Exception as exc:  # not known here (an MCP server's tool): its arguments as given
        stage.log.info("question from the arguments as given", tool=name, why=str(exc))
    return parsed
