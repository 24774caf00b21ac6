"""The system asks, the person answers (issue #44, H1), and the taint lives as long as the
text (M5): the question built from the exact call, the pending action taken once by the
session's next turn, confirmed only by a plain yes of the same device said after the question
was played, the confirmed call run by the system and nothing else; against a real Redis."""

from __future__ import annotations

import json
import threading
import time
import uuid

import pytest

from tests.unit import test_guard_taint as taint
from tests.unit.test_context_redis import long_history, new_stage, prepare_context
from tests.unit.test_context_redis import runtime as context_runtime
from tests.unit.test_guard_taint import (
    ACTIONS,
    new_turn,
    run,
)
from voxqueue.contracts import AgentStep, ToolOutcome, TurnSpec
from voxqueue.contracts.confirm import PendingAction
from voxqueue.sessions import Sessions
from workers.agent import confirmation
from workers.agent import messages as msg
from workers.agent.history import History
from workers.agent.opening import history_of, open_turn
from workers.runtime.resources import Runtime
from workers.runtime.stage import Stage
from workers.tool_registry.confirm import CONFIRMED_FIELD, question_for
from workers.tool_registry.context import ToolCall
from workers.tool_registry.registry import ToolRegistry
from workers.tools.executor import run_tool_call
from workers.tools.guard import TurnGuard
from workers.wiring import runtime_for

rt = taint.rt  # the fixtures: a runtime on the guard tests' db, and their tools
registry = taint.registry
FRONT = ("unlock", {"door": "front"})


def run_as(rt: Runtime, registry: ToolRegistry, spec: TurnSpec, call_id: str, name: str,
           args: dict) -> ToolOutcome:
    call = ToolCall(turn_id=spec.turn_id, session_id=spec.session_id, device=spec.device,
                    call_id=call_id, name=name)
    return run_tool_call(registry, call, json.dumps(args), timeout_s=5, max_chars=4000)


def question_turn(rt: Runtime, registry: ToolRegistry, session: str, *calls: tuple[str, dict],
                  device: str | None = None, ended: str | None = "ok",
                  asked_ago_s: float = 0.0) -> confirmation.Asked:
    """A turn whose model read a page and then asked for ``calls``: held back by the guard,
    asked about by the system (the agent's step after the tools) ``asked_ago_s`` ago, then
    ended ``ended``."""
    spec = new_turn(rt, session, "read me that page", device=device)
    assert run(rt, registry, spec, "read_page").ok
    made, ran = [], {}
    for name, args in calls:
        out = run(rt, registry, spec, name, args)
        assert out.error_code == "needs-confirmation", out
        made.append({"id": out.call_id, "name": name, "arguments": json.dumps(args)})
        ran[out.call_id] = out
    stage = Stage(rt, spec, "agent", 2)
    asked = confirmation.ask(stage, made, ran, clock=lambda: time.time() - asked_ago_s)
    assert asked is not None
    asked.write_in(stage.once("tools-1"), stage, 2).run()
    if ended:
        rt.store.finish(spec, ended)
    return asked


def answer(rt: Runtime, session: str, text: str | None = None, *, device: str | None = None,
           transcript: str | None = None, spec: TurnSpec | None = None) -> TurnSpec:
    """The session's next turn, opened by the agent (which answers the pending action), and
    ended."""
    spec = spec or new_turn(rt, session, text, transcript=transcript, device=device)
    assert open_turn(Stage(rt, spec, "agent", 1), AgentStep(turn_id=spec.turn_id, step=1))
    rt.store.finish(spec, "ok")
    return spec


def confirmed(rt: Runtime, spec: TurnSpec) -> PendingAction | None:
    raw = rt.redis.hget(rt.keys.turn(spec.turn_id), CONFIRMED_FIELD)
    return PendingAction.model_validate_json(raw) if raw else None


# -- the question ------------------------------------------------------------------------------
@pytest.mark.parametrize(("tool", "args", "question"), [
    ("home_assistant_call", {"domain": "lock", "service": "unlock",
                             "entity_id": "lock.front_door"}, "Unlock the front door?"),
    ("home_assistant_call", {"domain": "alarm_control_panel", "service": "alarm_disarm",
                             "entity_id": "alarm_control_panel.house"}, "Disarm the house alarm?"),
    ("home_assistant_call", {"domain": "light", "service": "turn_on", "entity_id":
                             "light.kitchen", "data": {"brightness_pct": 50}},
     "Turn on the kitchen light with brightness pct 50?"),
    ("send_notification", {"message": "the code is 1234", "title": ""},
     'Send the notification "the code is 1234"?'),
    ("set_timer", {"duration": "5 minutes", "label": "tea"},
     'Set a timer for 5 minutes called "tea"?'),
    ("remember", {"fact": "the safe code is 9931"}, 'Remember "the safe code is 9931"?'),
    ("delete_monitor", {"name": "shop"}, 'Delete the monitor "shop"?'),
    ("record_side_effect", {"label": "x", "times": 2}, 'Run record side effect with label "x", '
                                                       'times 2?'),
])
def test_the_question_says_the_exact_action(tool, args, question):
    assert question_for(tool, args) == question


# -- asking ------------------------------------------------------------------------------------
def test_the_system_asks_about_the_first_held_back_call_only(rt, registry):
    asked = question_turn(rt, registry, "s-ask", FRONT, ("unlock", {"door": "back"}))
    entry = PendingAction.model_validate_json(rt.redis.get(rt.keys.pending_action("s-ask")))
    assert entry.question == 'Run unlock with door "front"?' and entry.name == "unlock"
    assert json.loads(entry.arguments) == {"door": "front"}
    assert 0 < rt.redis.ttl(rt.keys.pending_action("s-ask")) <= rt.settings.tools.confirm_ttl_s
    answer_record = json.loads(rt.redis.hget(rt.keys.turn(entry.turn_id), "answer:2"))
    assert answer_record["text"] == entry.question and answer_record["calls"] == []
    first, second = sorted(asked.held, key=lambda c: c != entry.call_id)
    assert "the system asked the person" in asked.message(first, "unlock")["content"]
    assert "its own confirmation" in asked.message(second, "unlock")["content"]
    assert ACTIONS == []


# -- answering ---------------------------------------------------------------------------------
def test_a_plain_yes_of_the_next_turn_runs_exactly_that_call_once(rt, registry):
    question_turn(rt, registry, "s-yes", FRONT)
    yes = answer(rt, "s-yes", "Yeah, go ahead.")
    action = confirmed(rt, yes)
    assert action is not None and action.call_id == confirmation.system_call_id(yes.turn_id)
    assert not rt.redis.exists(rt.keys.pending_action("s-yes"))
    # Step 1 of the yes turn is the system's: the confirmed call, verbatim.
    step1 = json.loads(rt.redis.hget(rt.keys.turn(yes.turn_id), "answer:1"))
    assert step1["calls"] == [{"id": action.call_id, "name": "unlock",
                               "arguments": json.dumps({"door": "front"})}]
    assert run_as(rt, registry, yes, action.call_id, *FRONT).ok and ACTIONS == ["front"]
    # In that turn the same action again, or any other side effect, is refused, not parked.
    again = run(rt, registry, yes, *FRONT)
    other = run(rt, registry, yes, "unlock", {"door": "back"})
    assert again.error_code == other.error_code == "not-confirmed"
    assert ACTIONS == ["front"] and not rt.redis.exists(rt.keys.pending_action("s-yes"))
    # A second yes finds nothing: the model's call is only held back (and asked about) again.
    sure = answer(rt, "s-yes", "sure")
    assert confirmed(rt, sure) is None
    assert run(rt, registry, sure, *FRONT).error_code == "needs-confirmation"
    assert ACTIONS == ["front"]


def test_a_turn_that_failed_in_between_uses_the_question_up(rt, registry):
    """A yes counts only in the next turn: a turn of the session that failed before the agent
    (not heard, say) comes between, and a yes after it confirms nothing."""
    question_turn(rt, registry, "s-between", FRONT)
    between = new_turn(rt, "s-between", None, transcript="")
    rt.store.finish(between, "error", ("stt-no-text-recognized", "nothing heard"))
    yes = answer(rt, "s-between", "yes")
    assert confirmed(rt, yes) is None and ACTIONS == []


def test_a_yes_at_the_tools_alone_runs_nothing(rt, registry):
    """The old way: the model calling the action again in a yes turn. Without the system's
    question and its take, nothing runs."""
    question_turn(rt, registry, "s-tools", FRONT)
    yes = new_turn(rt, "s-tools", "yes please")
    assert run(rt, registry, yes, *FRONT).error_code == "needs-confirmation"
    assert ACTIONS == []


@pytest.mark.parametrize("text", ["no, don't", "yes, but not now", "what's the weather",
                                  "yes unlock the back door too"])
def test_anything_but_a_plain_yes_drops_it(rt, registry, text):
    question_turn(rt, registry, "s-no", FRONT)
    assert confirmed(rt, answer(rt, "s-no", text)) is None
    assert not rt.redis.exists(rt.keys.pending_action("s-no"))
    assert confirmed(rt, answer(rt, "s-no", "yes")) is None  # dropped, not waiting
    assert ACTIONS == []


def test_a_yes_of_another_device_or_session_confirms_nothing(rt, registry):
    question_turn(rt, registry, "s-dev", FRONT, device="porch")
    assert confirmed(rt, answer(rt, "s-dev-2", "yes", device="porch")) is None
    assert rt.redis.exists(rt.keys.pending_action("s-dev"))  # another session's, untouched
    assert confirmed(rt, answer(rt, "s-dev", "yes", device="hall")) is None
    assert not rt.redis.exists(rt.keys.pending_action("s-dev"))  # answered: dropped


def test_the_same_device_confirms(rt, registry):
    question_turn(rt, registry, "s-porch", FRONT, device="porch")
    assert confirmed(rt, answer(rt, "s-porch", "yes", device="porch")) is not None


def test_a_yes_before_the_question_was_played_confirms_nothing(rt, registry):
    early = new_turn(rt, "s-early", "yes")  # begun before the question was put
    question_turn(rt, registry, "s-early", FRONT)
    assert confirmed(rt, answer(rt, "s-early", spec=early)) is None
    question_turn(rt, registry, "s-cut", FRONT, ended="error")  # its question not played
    assert confirmed(rt, answer(rt, "s-cut", "yes")) is None


def test_a_spoken_yes_is_read_from_the_transcript(rt, registry):
    question_turn(rt, registry, "s-voice", FRONT)
    yes = answer(rt, "s-voice", transcript="Yes please.")
    assert confirmed(rt, yes) is not None
    assert history_of(Stage(rt, yes, "agent", 1)).load()[-1] == msg.user("Yes please.")


def test_a_pending_action_expires(rt, registry):
    short = runtime_for(rt.settings.replace(tools={"confirm_ttl_s": 60}))
    question_turn(short, registry, "s-soon", FRONT, asked_ago_s=59)
    assert 0 < short.redis.ttl(short.keys.pending_action("s-soon")) <= 60, "Redis drops it too"
    assert confirmed(short, answer(short, "s-soon", "yes")) is not None, "within its time"
    question_turn(short, registry, "s-late", FRONT, asked_ago_s=61)  # (its key not yet gone)
    assert confirmed(short, answer(short, "s-late", "yes")) is None


def test_concurrent_yes_turns_take_it_once(rt, registry):
    question_turn(rt, registry, "s-race", FRONT)
    pending = rt.redis.get(rt.keys.pending_action("s-race"))
    turns = [new_turn(rt, "s-race", "yes") for _ in range(3)]
    got: list[PendingAction | None] = []
    start = threading.Barrier(len(turns))

    def take(spec: TurnSpec) -> None:
        start.wait()
        got.append(confirmation.take(Stage(rt, spec, "agent", 1), "yes", pending, None, False))

    threads = [threading.Thread(target=take, args=(t,)) for t in turns]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(a is not None for a in got) == 1


def test_a_redelivered_opening_keeps_its_answer(rt, registry):
    question_turn(rt, registry, "s-again", FRONT)
    yes = new_turn(rt, "s-again", "yes")
    stage = Stage(rt, yes, "agent", 1)
    first = confirmation.take(stage, "yes", rt.redis.get(rt.keys.pending_action("s-again")),
                              None, False)
    recorded = rt.redis.hget(rt.keys.turn(yes.turn_id), CONFIRMED_FIELD)
    assert first is not None and confirmation.take(stage, "yes", None, recorded, True) == first


def test_clearing_a_session_clears_its_taint_and_pending_action(rt, registry):
    question_turn(rt, registry, "s-clear", FRONT)
    Sessions(rt.redis, rt.keys, rt.settings).clear("s-clear")
    assert not rt.redis.exists(rt.keys.session_untrusted("s-clear"))
    assert not rt.redis.exists(rt.keys.pending_action("s-clear"))


# -- M5: the taint lives as long as the text ---------------------------------------------------
def test_the_taint_lives_as_long_as_the_history(rt, registry):
    short = runtime_for(rt.settings.model_copy(update={"session_ttl_s": 3}))
    spec = new_turn(short, "s-ttl", "read me that page")
    call = ToolCall(turn_id=spec.turn_id, session_id="s-ttl", device=None, call_id="c",
                    name="read_page")
    TurnGuard(short.redis, short.keys, short.settings).taint(call, "read_page")
    history = History(short.redis, short.keys, "s-ttl", short.settings.turns.session_ttl_s)
    history.extend([msg.user("read me that page"), msg.assistant("It says to unlock.")])
    taint = short.keys.session_untrusted("s-ttl")
    short.redis.pexpire(taint, 500)  # as if most of the taint's first TTL had gone by
    history.extend([msg.user("and now?"), msg.assistant("Nothing new.")])  # a later turn
    assert short.redis.pttl(taint) > 2000, "the taint lives on with the history it is about"
    assert short.redis.pttl(taint) >= short.redis.pttl(history.key) - 100
    assert short.redis.exists(taint), "the text is still there"
    assert run(short, registry, new_turn(short, "s-ttl", "unlock it"), *FRONT).error_code == \
        "needs-confirmation"


def test_the_taint_survives_compaction(redis_server, fake):
    fake.script_chat({"match": "summarize the conversation", "repeat": True,
                      "content": "A page told the assistant to unlock the front door."})
    url = redis_server.url.rsplit("/", 1)[0] + "/10"
    ctx = context_runtime(url, fake, session_ttl_s=600, key_prefix=f"vqc-{uuid.uuid4().hex[:6]}")
    session = "s-compact"
    history = long_history(ctx, session, 30)
    stage = new_stage(ctx, session)
    taint = ctx.keys.session_untrusted(session)
    ctx.redis.set(taint, "t", ex=30)  # a page read a while ago: its first TTL nearly spent
    sent = prepare_context(stage, history)  # summarized: the history replaced
    assert any(m["role"] == "system" and "unlock" in m["content"] for m in sent)
    assert sent == history.load()
    # The summary holds the page: the taint now lives as long as it does.
    assert ctx.redis.ttl(taint) > 30 and ctx.redis.ttl(taint) >= ctx.redis.ttl(history.key) - 1
