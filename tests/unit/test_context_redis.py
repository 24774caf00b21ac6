"""The context hook against real Redis and the fake LLM server: compaction is stored
atomically, counted and reported; sessions are listed, shown, pruned and cleared."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from voxqueue.contracts import TurnSpec
from voxqueue.keys import Keys
from voxqueue.once import Once
from voxqueue.sessions import Sessions
from voxqueue.settings import (
    AgentSettings,
    ProviderSettings,
    RedisSettings,
    Settings,
    ToolSettings,
    TurnSettings,
)
from workers.agent import messages as msg
from workers.agent.context import measure_context
from workers.agent.context.accounting import record_step_in, session_stats, turn_steps
from workers.agent.context.compaction import is_summary
from workers.agent.history import History
from workers.runtime.resources import Runtime
from workers.runtime.stage import Stage
from workers.wiring import runtime_for

DB = 10


@pytest.fixture
def url(redis_server) -> Iterator[str]:
    url = redis_server.url[:-1] + str(DB)
    redis.Redis.from_url(url).flushdb()
    yield url


def runtime(url: str, fake: object | None, providers: dict[str, Any] | None = None,
            **agent: Any) -> Runtime:
    """A runtime on the fake OpenAI (``fake``), with some of the agent's settings."""
    keys = {} if fake is None else {"openai_api_key": "sk-test",
                                    "openai_base_url": fake.openai_base_url}  # type: ignore[attr-defined]
    return runtime_for(Settings(
        redis=RedisSettings(url=url), tools=ToolSettings(allow="get_current_time"),
        providers=ProviderSettings(**{"llm": "openai", "backoff_s": 0.01, **keys,
                                      **(providers or {})}),
        agent=AgentSettings(**{"context_limits": {"gpt-4o-mini": 600}, **agent})))


def new_stage(rt: Runtime, session: str) -> Stage:
    now = time.time()
    spec = TurnSpec(
        turn_id=uuid.uuid4().hex,
        session_id=session,
        input="text",
        text="hi",
        created_at=now,
        deadline=now + 30,
        speak=False,
    )
    rt.store.create(spec)
    return Stage(rt, spec, "agent", 1)


def long_history(rt: Runtime, session: str, turns: int) -> History:
    history = History(rt.redis, rt.keys, session, rt.settings.turns.session_ttl_s)
    history.extend(
        [
            msg.system(rt.settings.agent.system_prompt),
            msg.user("my locker code is 4711"),
            msg.assistant("Noted."),
        ]
    )
    for n in range(turns):
        history.extend(
            [
                msg.user(f"filler message number {n}"),
                msg.assistant(f"You said: filler message number {n}"),
            ]
        )
    return history


def events(rt: Runtime, turn_id: str, kind: str) -> list[dict[str, object]]:
    return [e.event.data for e in rt.store.history(turn_id) if e.event.type == kind]



_steps: dict[str, int] = {}


def prepare_context(stage, history):  # type: ignore[no-untyped-def]
    """What a step does with its context: measured (compacted) before the model call, its size
    recorded with the answer (the agent loop's way)."""
    prepared = measure_context(stage, history, history.load())
    step = _steps[stage.turn_id] = _steps.get(stage.turn_id, 0) + 1
    rt = stage.rt
    record_step_in(Once(rt.redis), rt.keys, stage.spec, step, tokens=prepared.tokens,
                   limit=prepared.limit, messages=len(prepared.messages),
                   ttl_s=rt.settings.turns.session_ttl_s).run()
    return prepared.messages

def test_history_replace_is_atomic_and_checks_the_length(url):
    r = redis.Redis.from_url(url)
    history = History(r, Keys(), "s1", 60)
    history.extend([msg.user("a"), msg.assistant("b"), msg.user("c")])
    assert not history.replace([msg.user("x")], expect_len=2)
    assert len(history) == 3
    assert history.replace([msg.system("p"), msg.user("x")], expect_len=3)
    assert history.load() == [msg.system("p"), msg.user("x")]
    assert 0 < r.ttl(history.key) <= 60


def test_a_long_history_is_summarized_stored_counted_and_reported(url, fake):
    fake.script_chat(
        {
            "match": "summarize the conversation",
            "repeat": True,
            "content": "The user's locker code is 4711.",
        }
    )
    rt = runtime(url, fake)
    history = long_history(rt, "long", 30)
    before = len(history)
    stage = new_stage(rt, "long")

    sent = prepare_context(stage, history)

    assert sent == history.load()  # what the model gets is what is stored
    assert len(sent) < before
    assert sent[0]["content"] == rt.settings.agent.system_prompt
    assert is_summary(sent[1]) and "4711" in sent[1]["content"]
    assert sent[-1] == msg.assistant("You said: filler message number 29")
    summaries = fake.chat_requests()
    assert summaries and all(not r.get("tools") for r in summaries)
    assert "my locker code is 4711" in summaries[0]["messages"][-1]["content"]
    (event,) = events(rt, stage.turn_id, "context-summarized")
    assert event["mode"] == "summary" and event["stored"] is True
    assert event["before_tokens"] > 480 >= event["after_tokens"]  # 80 % of 600
    assert event["summarized_messages"] == before - len(sent) + 1
    stats = session_stats(rt.redis, rt.keys, "long")
    assert stats["summaries"] == 1 and stats["tokens"] == event["after_tokens"]
    assert turn_steps(rt.redis, rt.keys, stage.turn_id) == [
        {"tokens": event["after_tokens"], "limit": 600, "messages": len(sent)}
    ]

    # Within the budget now: the next call sends the history as it is.
    calls = len(fake.chat_requests())
    assert prepare_context(stage, history) == sent
    assert len(fake.chat_requests()) == calls
    assert len(turn_steps(rt.redis, rt.keys, stage.turn_id)) == 2
    assert session_stats(rt.redis, rt.keys, "long")["summaries"] == 1


def test_a_failing_summarizer_trims_instead_of_failing_the_turn(url, fake):
    fake.inject("chat", status=500, times=20)
    rt = runtime(url, fake, {"max_attempts": 1})
    history = long_history(rt, "failing", 30)
    stage = new_stage(rt, "failing")
    sent = prepare_context(stage, history)
    assert not any(is_summary(m) for m in sent)
    assert sent[1]["role"] == "user"
    (event,) = events(rt, stage.turn_id, "context-summarized")
    assert event["mode"] == "trim"
    assert session_stats(rt.redis, rt.keys, "failing")["trims"] == 1


def test_a_short_history_is_left_alone(url, fake):
    rt = runtime(url, fake, context_limits={})
    history = long_history(rt, "short", 3)
    stage = new_stage(rt, "short")
    assert prepare_context(stage, history) == history.load()
    assert events(rt, stage.turn_id, "context-summarized") == []
    assert fake.chat_requests() == []
    (step,) = turn_steps(rt.redis, rt.keys, stage.turn_id)
    assert step["limit"] == 8192 and 0 < step["tokens"] < 400


def test_sessions_list_show_clear_and_forget_expired_ones(url):
    settings = Settings(redis=RedisSettings(url=url), turns=TurnSettings(session_ttl_s=3600))
    r = redis.Redis.from_url(url)
    keys = Keys(settings.redis.key_prefix)
    now = time.time()
    for sid, used in (
        ("kitchen", now - 10),
        ("office", now - 20),
        ("old", now - 7200),
        ("gone", now - 1000),
        ("starting", now - 5),
    ):
        r.zadd(keys.sessions(), {sid: used})
    for sid in ("kitchen", "office"):
        History(r, keys, sid, 3600).extend([msg.user(f"hello from {sid}")])
    r.hset(keys.context_stats("kitchen"), mapping={"tokens": 42, "summaries": 2})
    sessions = Sessions(r, keys, settings)

    listed = sessions.all()
    # "old" passed the TTL; "gone" lost its history; "starting" has no history yet but its
    # first turn may still be running.
    assert [s.session_id for s in listed] == ["starting", "kitchen", "office"]
    kitchen = listed[1]
    assert kitchen.messages == 1 and kitchen.tokens == 42 and kitchen.summaries == 2
    assert kitchen.expires_in_s is not None and 3500 < kitchen.expires_in_s <= 3600
    assert json.loads(json.dumps(kitchen.as_dict()))["session_id"] == "kitchen"
    assert sessions.history("office") == [msg.user("hello from office")]
    assert sessions.history("nobody") is None

    assert sessions.clear("kitchen")
    assert not r.exists(keys.messages("kitchen"), keys.context_stats("kitchen"))
    assert not sessions.clear("kitchen")
    assert sessions.clear_all() == 2
    assert sessions.all() == []


def test_with_the_local_agent_the_oldest_turns_are_trimmed(url):
    rt = runtime(url, None, {"llm": "local"})
    assert rt.chat_model.name == "local"
    history = long_history(rt, "offline", 30)
    stage = new_stage(rt, "offline")
    sent = prepare_context(stage, history)
    assert sent == history.load()
    assert sent[0]["content"] == rt.settings.agent.system_prompt
    assert sent[1]["role"] == "user" and sent[-1]["content"].endswith("number 29")
    assert not any(is_summary(m) for m in sent)
    (event,) = events(rt, stage.turn_id, "context-summarized")
    assert event["mode"] == "trim" and event["after_tokens"] <= 480
    assert session_stats(rt.redis, rt.keys, "offline")["trims"] == 1
