"""A turn that ended between asking for tools and getting their results (cancel, deadline)
leaves unanswered tool calls; the session's next turn answers them first, or OpenAI would
refuse every later request of the session."""

from __future__ import annotations

import time
import uuid

import redis

from tests.reliability.ledger import history_problems
from voxqueue.contracts import AgentStep, TurnSpec
from voxqueue.settings import Settings
from workers.agent import messages as msg
from workers.agent.opening import history_of, open_turn
from workers.runtime.stage import Stage
from workers.wiring import runtime_for

DB = 8


def test_the_next_turn_answers_calls_a_cancelled_turn_left_open(redis_server):
    url = redis_server.url[:-1] + str(DB)
    redis.Redis.from_url(url).flushdb()
    rt = runtime_for(Settings(_env_file=None, redis_url=url))  # type: ignore[call-arg]
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
    assert msg.unanswered_calls(history.load()) == ["c2"]

    open_turn(Stage(rt, spec, "agent", 1), AgentStep(turn_id=spec.turn_id, step=1))

    after = history.load()
    assert history_problems(after) == []
    assert after[-2]["tool_call_id"] == "c2" and after[-2]["content"].startswith("Error")
    assert after[-1] == msg.user("and now?")
    assert [m["role"] for m in after].count("system") == 1
