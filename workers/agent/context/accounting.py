"""Token accounting in Redis: per step of a turn, and per session (with compaction counts)."""

from __future__ import annotations

import json
from typing import Any

import redis

from voxqueue.contracts import TurnSpec
from voxqueue.keys import Keys
from voxqueue.once import Once


def record_step_in(once: Once, keys: Keys, spec: TurnSpec, step: int, *, tokens: int,
                   limit: int, messages: int, ttl_s: int) -> Once:
    """One LLM call's prompt size, as writes of ``once`` (the step's stored answer, so no
    round trip of its own): ``context:<step>`` and ``context:calls`` in the turn's hash, the
    latest figures and running totals in the session's."""
    turn_key = keys.turn(spec.turn_id)
    stats = keys.context_stats(spec.session_id)
    entry = {"tokens": tokens, "limit": limit, "messages": messages}
    return (once.call("HSET", turn_key, f"context:{step}", json.dumps(entry))
            .call("HSET", turn_key, "context:calls", step)
            .call("HSET", stats, "tokens", tokens, "limit", limit, "messages", messages,
                  "turn_id", spec.turn_id)
            .call("HINCRBY", stats, "llm_calls", 1)
            .call("HINCRBY", stats, "prompt_tokens_total", tokens)
            .call("EXPIRE", stats, ttl_s))


def record_compaction(r: redis.Redis, keys: Keys, session_id: str, mode: str, ttl_s: int) -> int:
    """Count a summary (or trim) of the session's history; returns the new count."""
    stats = keys.context_stats(session_id)
    field = "summaries" if mode == "summary" else "trims"
    pipe = r.pipeline(transaction=False)
    pipe.hincrby(stats, field, 1)
    pipe.expire(stats, ttl_s)
    return int(pipe.execute()[0])


def session_stats(r: redis.Redis, keys: Keys, session_id: str) -> dict[str, Any]:
    """The session's accounting: ints where numeric, else text."""
    raw: Any = r.hgetall(keys.context_stats(session_id))
    stats: dict[str, Any] = {}
    for key, value in raw.items():
        name = key.decode() if isinstance(key, bytes) else str(key)
        text = value.decode() if isinstance(value, bytes) else str(value)
        stats[name] = int(text) if text.lstrip("-").isdigit() else text
    return stats


def turn_steps(r: redis.Redis, keys: Keys, turn_id: str) -> list[dict[str, Any]]:
    """The prompt size of each LLM call of a turn, in order."""
    raw: Any = r.hgetall(keys.turn(turn_id))
    fields = {(k.decode() if isinstance(k, bytes) else str(k)): v for k, v in raw.items()}
    calls = int(fields.get("context:calls", 0))
    return [
        json.loads(fields[f"context:{n}"]) for n in range(1, calls + 1) if f"context:{n}" in fields
    ]
