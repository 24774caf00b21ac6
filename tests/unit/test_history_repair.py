"""A turn that ended between asking for tools and getting their results (cancel, deadline)
leaves unanswered tool calls; the session's next turn answers them first, or OpenAI would
refuse every later request of the session."""

from __future__ import annotations

import time
import uuid

import redis

from tests.reliability.ledger import history_problems
from voxqueue.contracts import AgentStep, TurnSpec
from voxqueue.settings import RedisSettings, Settings
from workers.agent import messages as msg
from workers.agent.opening import history_of, open_turn
from workers.runtime.stage import Stage
from workers.wiring import runtime_for

DB = 8


def test_the_next_turn_answers_calls_a_cancelled_turn_left_open(redis_server):
    url = redis_server.url[:-1] + str(DB)
    redis.Redis.from_url(url).flushdb()
    rt = runtime_for(Settings(redis=RedisSettings(url=url)))
    session = f"s-{uuid.uuid4().hex[:6]}"
    now = time.time()
    spec = TurnSpec(turn_id=uuid.uuid4().hex, session_id=session, input="text",
                    text="and now?", created_at=now, deadline=now + 30, speak=False)
    rt.store.create(spec)
    history = history_of(Stage(rt, spec, "agent", 1))
    calls = [{"id": "c1", "name": "a", "arguments": "{}"},
             {"id": "c2", "name": "b", "arguments": "{}"}]
    history.extend([msg.system("sys"), msg.user("two things"), msg.assistant_tool_calls(calls),
                    msg.tool_result("c1", "done")])  # c2 never answered: the turn was cancelled
    assert history_problems(history.load()) != []
    assert msg.repaired(history.load())[3:5] == [
        msg.tool_result("c1", "done"), msg.tool_error("c2", msg.ENDED_BEFORE_RESULT)]

    open_turn(Stage(rt, spec, "agent", 1), AgentStep(turn_id=spec.turn_id, step=1))

    after = history.load()
    assert history_problems(after) == []
    assert after[-2]["tool_call_id"] == "c2" and after[-2]["content"].startswith("Error")
    assert after[-1] == msg.user("and now?")
    assert [m["role"] for m in after].count("system") == 1


def _call(cid: str) -> dict[str, str]:
    return {"id": cid, "name": "lights", "arguments": "{}"}


def test_the_repair_scans_the_whole_history_not_the_last_answer():
    """A cancelled turn's late tool-call message landed after the next turn's user message
    (what the review replayed): the calls anywhere in the list get answered where they stand,
    an answer that came later is moved up, an orphan answer is dropped."""
    broken = [msg.system("sys"), msg.user("turn on the lights"),
              msg.assistant_tool_calls([_call("a1")]),           # never answered
              msg.user("and the heating?"),
              msg.assistant_tool_calls([_call("b1"), _call("b2")]),
              msg.tool_result("b2", "heating on"),
              msg.tool_result("zz", "answers no call"),
              msg.assistant("The heating is on."),
              msg.tool_result("b1", "late, but real")]
    assert history_problems(broken) != []
    fixed = msg.repaired(broken)
    assert history_problems(fixed) == []
    assert fixed[2:4] == [msg.assistant_tool_calls([_call("a1")]),
                          msg.tool_error("a1", msg.ENDED_BEFORE_RESULT)]
    assert fixed[5:8] == [msg.assistant_tool_calls([_call("b1"), _call("b2")]),
                          msg.tool_result("b1", "late, but real"),
                          msg.tool_result("b2", "heating on")]
    assert fixed[-1] == msg.assistant("The heating is on.")
    assert msg.repaired(fixed) == fixed, "a valid history is left as it is"


def test_a_turn_that_ended_writes_no_more_history(redis_server):
    """Every history write of a stage checks, in its own script, that the turn has not ended:
    a cancelled turn's late step cannot append after the session moved on."""
    url = redis_server.url[:-1] + str(DB)
    redis.Redis.from_url(url).flushdb()
    rt = runtime_for(Settings(redis=RedisSettings(url=url)))
    now = time.time()
    spec = TurnSpec(turn_id=uuid.uuid4().hex, session_id=f"s-{uuid.uuid4().hex[:6]}",
                    input="text", text="hi", created_at=now, deadline=now + 30, speak=False)
    rt.store.create(spec)
    stage = Stage(rt, spec, "agent", 1)
    history = history_of(stage)
    rt.store.cancel(spec.turn_id)
    rt.store.finish(spec, "cancelled")
    late = history.extend_in(stage.once("history-1"),
                             [msg.assistant_tool_calls([_call("late")])]).run()
    assert late is None and history.load() == []


def test_a_zombie_cannot_replace_the_history(redis_server):
    """Compaction and the repair swap the whole list: only the job's newest attempt may."""
    from voxqueue.once import Fence
    from workers.agent.history import History

    r = redis.Redis.from_url(redis_server.url[:-1] + str(DB))
    r.flushdb()
    history = History(r, runtime_for(Settings(
        redis=RedisSettings(url=redis_server.url[:-1] + str(DB)))).keys, "s-zombie", 60)
    history.extend([msg.user("one"), msg.assistant("two")])
    r.set("deliveries", 2)
    assert not history.replace([msg.user("summary")], expect_len=2, fence=Fence("deliveries", 1))
    assert len(history) == 2
    assert history.replace([msg.user("summary")], expect_len=2, fence=Fence("deliveries", 2))
    assert history.load() == [msg.user("summary")]
