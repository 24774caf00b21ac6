"""Redis that fails over: a primary, a replica and three real sentinels (``redis-server
--sentinel``); the chaos test's sessions run turns (a side effect written to a file outside
Redis among their tools) while the primary is SIGKILLed at random instants, the sentinels
promote the replica, and the killed server comes back as a replica, so the next kill fails
back. The chaos ledger then checks every turn, every history and the side effect's file
(tests/reliability/chaos_ledger.py), and each gap is measured from the kill to a write.

The short form (two failovers, each layout) runs in ``./vq test``; the long one (five) with
``--crash``. docs/failover.md has the figures.
"""

from __future__ import annotations

import pytest

from testkit.sentinel import SentinelSet
from tests.reliability.chaos_run import Plan, chosen_seed
from tests.reliability.test_chaos import checked_run

pytestmark = pytest.mark.integration


#: The sentinels declare a primary down after this long without an answer: compose's setting.
#: At 1 s (the Sentinel tests'), on a machine busy with other suites, the sentinels once made
#: a third failover after two kills (their config epoch said so), back to the old primary,
#: restarted and not yet a replica: every write since the second failover was undone, which
#: no client can prevent. Production settings are longer still.
DOWN_AFTER_MS = 3000


def failover(plan: Plan, tmp_path, reliability_case) -> None:
    sentinels = SentinelSet(down_after_ms=DOWN_AFTER_MS)
    try:
        found = checked_run(plan, tmp_path, reliability_case, sentinels.url,
                            f"{plan.failovers} SIGKILLs of the Redis primary",
                            sentinels=sentinels)
    finally:
        sentinels.stop()
    assert len(found.failover_gaps) == plan.failovers
    print(f"failover gaps (kill -> a write through the sentinels): "
          f"{[round(g, 1) for g in found.failover_gaps]} s")


@pytest.mark.timeout(600)
@pytest.mark.parametrize("layout", ["per-queue", "up", "default"])
def test_failover_and_back_under_turns(layout, tmp_path, reliability_case):
    plan = Plan(seed=chosen_seed(), layout=layout, sessions=4, turns=20, kills=0,
                mean_gap_s=2.0, failovers=2)
    failover(plan, tmp_path, reliability_case)


@pytest.mark.crash
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("layout", ["per-queue", "up", "default"])
def test_failovers_back_and_forth_long(layout, tmp_path, reliability_case):
    plan = Plan(seed=chosen_seed(), layout=layout, sessions=8, turns=40, kills=0,
                mean_gap_s=2.0, failovers=5, deadline_s=60.0)
    failover(plan, tmp_path, reliability_case)
