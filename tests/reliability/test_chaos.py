"""The chaos test, in the spirit of Jepsen: concurrent sessions do turns while a seeded killer
SIGKILLs worker processes of every queue at random instants (each restarted as ``voxqueue up``
restarts it), garbage sits on every queue, and some turns are cancelled while their tools run;
then a ledger that does not trust the system checks what happened (tests/reliability/
chaos_ledger.py):

- lost: every turn ends (ok, or cancelled by its caller) before its deadline;
- effects twice: the side effect's own file (written by the tool, outside Redis) has at most
  one line per call id;
- false tool outcomes: what each session's history told the model about every call of the side
  effect matches the file ("ran as run R": line R exists; "did not run": no line); the
  "may or may not have run" answers are counted apart, as uncertain;
- spoken != recorded: what was heard (the fake voice's audio decoded back into words) is what
  was sent to the voice, and that is the reply the history records;
- invalid histories: every session's whole history is one OpenAI accepts;
- the next turn of every session works: one clean turn per session after the kills;
- no worker process exits unless it was killed (poison, for one, must not kill a worker).

The fake model words every answer afresh (asked again, it says something else), streams several
sentences, calls 1-3 tools in parallel (the side effect first) and quotes the tools' messages in
its reply (testkit/fakes/chaos_model.py).

``VOXQUEUE_CHAOS_SEED=N`` replays a run's choices (kills, turns, wording; the instants depend on
the machine too). The short form always runs; ``--crash`` runs the long one.
"""

from __future__ import annotations

import pytest

from testkit.sentinel import SentinelSet
from tests.conftest import RedisServer
from tests.reliability.chaos_ledger import Findings
from tests.reliability.chaos_run import Plan, chosen_seed, poisons, run_chaos

pytestmark = pytest.mark.integration

LAYOUTS = ("per-queue", "up", "default")


def short_plan(seed: int, layout: str) -> Plan:
    return Plan(seed=seed, layout=layout, sessions=4, turns=6, kills=10, mean_gap_s=1.5)


def long_plan(seed: int, layout: str) -> Plan:
    return Plan(seed=seed, layout=layout, sessions=8, turns=30, kills=80, mean_gap_s=2.0,
                deadline_s=60.0)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_chaos_short(layout, tmp_path, reliability_case):
    chaos(short_plan(chosen_seed(), layout), tmp_path, reliability_case)


@pytest.mark.crash
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_chaos_long(layout, tmp_path, reliability_case):
    chaos(long_plan(chosen_seed(), layout), tmp_path, reliability_case)


def chaos(plan: Plan, tmp_path, reliability_case) -> Findings:
    """Run ``plan`` on a Redis server of its own and check the ledger's findings."""
    server = RedisServer()
    server.start()
    try:
        return checked_run(plan, tmp_path, reliability_case, server.url,
                           f"{plan.kills} random SIGKILLs")
    finally:
        server.stop()


def checked_run(plan: Plan, tmp_path, reliability_case, redis_url: str, kills: str, *,
                sentinels: SentinelSet | None = None) -> Findings:
    """Run ``plan`` on ``redis_url``; fail on any finding but the uncertain outcomes."""
    print(f"\nchaos seed {plan.seed} (replay: VOXQUEUE_CHAOS_SEED={plan.seed}), {plan}")
    case = reliability_case(
        f"chaos ({plan.layout} layout): {plan.sessions} sessions x {plan.turns + 1} turns, "
        f"{kills}, {'poison on every queue' if poisons(plan) else 'no poison'}"
        f", barge-in; seed {plan.seed}")
    found, errors, log = run_chaos(plan, redis_url, tmp_path, sentinels=sentinels)
    figures = found.figures()
    print(found.table())
    print(found.evidence())
    case.turns = found.turns
    case.lost = len(found.lost)
    case.duplicates = len(found.effects_twice) + len(found.stream_duplicates)
    case.note(", ".join(f"{k} {v}" for k, v in figures.items() if k not in ("turns", "lost"))
              + f"; kills per queue {dict(sorted(found.kills.items()))}"
              + (f"; failover gaps {[round(g, 1) for g in found.failover_gaps]} s"
                 if found.failover_gaps else ""))
    said = (f"seed {plan.seed}, layout {plan.layout}\n{found.table()}\n{found.evidence()}"
            f"\nkeeper log:\n{log}")
    assert errors == [], f"the sessions raised:\n{errors}\n{said}"
    killed = sum(found.kills.values()) + len(found.failover_gaps)
    assert killed > 0 and found.effects > 0, f"a run that proves nothing\n{said}"
    failures = {name: value for name, value in figures.items()
                if name not in ("turns", "kills", "failovers", "cancelled", "effects",
                                "uncertain outcomes")
                and value}
    assert failures == {}, said
    return found
