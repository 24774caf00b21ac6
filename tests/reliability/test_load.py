"""Load: hundreds of turns at 50 at a time with instant fake providers; none lost, none doubled.

Each of ``concurrency`` threads plays one session and asks its turns one after another, so
sessions run in parallel while every session's history can be checked turn by turn. Some
turns call a tool, some are spoken. The p95 of the turns' end-to-end time is printed and
written to ``load.json`` in the test's tmp dir.
"""

from __future__ import annotations

import json
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.reliability.ledger import Case, audit

pytestmark = pytest.mark.integration

TOOL_REPLY = "The answer is four."


@dataclass(frozen=True)
class Plan:
    turns: int
    concurrency: int
    spoken_every: int  # every n-th turn of a session is spoken
    tool_every: int  # every n-th turn of a session calls the calculator


def text_of(session: int, k: int, plan: Plan) -> str:
    kind = "calc" if k % plan.tool_every == plan.tool_every - 1 else "plain"
    return f"{kind} question {k} of session {session}"


def percentile(values: list[float], p: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[p - 1]


def run_load(client, fake, case: Case, plan: Plan, out: Path, capsys) -> dict[str, float]:
    """Run the plan, audit every turn and every session's history; return the timings."""
    fake.script_chat(
        {"after_tool": True, "repeat": True, "content": TOOL_REPLY},
        {
            "match": "calc",
            "repeat": True,
            "tool_calls": [{"name": "calculate", "arguments": {"expression": "2 + 2"}}],
        },
    )
    per_session = plan.turns // plan.concurrency
    run = f"load-{int(time.time())}"

    def play(session: int) -> list[tuple[str, float, str]]:
        done = []
        for k in range(per_session):
            speak = k % plan.spoken_every == plan.spoken_every - 1
            text = text_of(session, k, plan)
            turn = client.ask(text, session=f"{run}-{session}", speak=speak, deadline_s=120)
            result = case.check(turn, timeout=150)
            assert result.status == "ok", (text, result.error)
            expected = TOOL_REPLY if text.startswith("calc") else f"You said: {text}"
            assert result.reply == expected, (text, result.reply)
            if speak:
                assert len(turn.audio()) > 0, f"{text}: no audio"
            done.append((turn.turn_id, result.timings["total"], text))
        return done

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=plan.concurrency) as pool:
        results = list(pool.map(play, range(plan.concurrency)))
    wall = time.monotonic() - started

    # Every session's history holds each turn exactly once, in order.
    for session, done in enumerate(results):
        raw = client.redis.lrange(client.keys.messages(f"{run}-{session}"), 0, -1)
        history = [json.loads(m) for m in raw]
        roles = [m["role"] for m in history]
        users = [m["content"] for m in history if m["role"] == "user"]
        assert users == [text for _, _, text in done], f"session {session}: user messages"
        assert roles.count("system") == 1
        finals = [m for m in history if m["role"] == "assistant" and not m.get("tool_calls")]
        assert len(finals) == per_session, f"session {session}: {len(finals)} replies"
        tools = [m["tool_call_id"] for m in history if m["role"] == "tool"]
        calls = sum(1 for _, _, text in done if text.startswith("calc"))
        assert len(tools) == len(set(tools)) == calls, f"session {session}: tool messages"
    # Audits again, now that every stage is idle: nothing came late, nothing twice.
    store = client.store
    for done in results:
        for turn_id, _, _ in done:
            found = audit(store, client.turn(turn_id))
            assert found.run_ends == 1 and found.duplicate_chunks == 0, found

    totals = [ms for done in results for _, ms, _ in done]
    stats = {
        "turns": len(totals),
        "concurrency": plan.concurrency,
        "wall_s": round(wall, 2),
        "turns_per_s": round(len(totals) / wall, 1),
        "p50_ms": round(percentile(totals, 50), 1),
        "p95_ms": round(percentile(totals, 95), 1),
        "max_ms": round(max(totals), 1),
    }
    out.write_text(json.dumps(stats, indent=1))
    with capsys.disabled():
        print(f"\nload: {json.dumps(stats)} -> {out}")
    case.note(
        f"{plan.concurrency} at a time; p50 {stats['p50_ms']:.0f} ms, "
        f"p95 {stats['p95_ms']:.0f} ms; {stats['turns_per_s']} turns/s"
    )
    return stats


def test_500_turns_at_50_concurrent(client, fake, reliability_case, tmp_path, capsys):
    case = reliability_case("load: 500 turns, 50 concurrent (1 in 10 spoken, 1 in 5 with a tool)")
    plan = Plan(turns=500, concurrency=50, spoken_every=10, tool_every=5)
    stats = run_load(client, fake, case, plan, tmp_path / "load.json", capsys)
    assert stats["turns"] == plan.turns
    assert case.lost == 0 and case.duplicates == 0


@pytest.mark.soak
def test_soak_3000_turns_at_100_concurrent(client, fake, reliability_case, tmp_path, capsys):
    case = reliability_case("soak: 3000 turns, 100 concurrent (1 in 3 spoken, 1 in 4 with a tool)")
    plan = Plan(turns=3000, concurrency=100, spoken_every=3, tool_every=4)
    stats = run_load(client, fake, case, plan, tmp_path / "load.json", capsys)
    assert stats["turns"] == plan.turns
    assert case.lost == 0 and case.duplicates == 0
