"""The join of one answer's tool calls: the last call to store its outcome sends the next step.

Celery's chord joins in the result backend: after the last member returns, the backend takes a
dispatch claim and only then publishes the callback, so a worker killed between the two leaves
the turn stranded (the redelivered member finds its result cached and cannot claim again). Here
the join is ours and crash-proof:

- a call stores its outcome and adds its call id to the step's join set in one script
  (``record_in``), so the count never disagrees with the outcomes stored;
- the call whose add completes the count sends the next step (``agent.resume``) under its fixed
  task id; every later delivery of any call of the step that finds the count complete sends it
  again (``send_if_complete``): a copy sent twice is one job, run once;
- the next step reads the stored outcomes (``read_outcomes``), never whichever copy reported.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from voxqueue.celery_config import AGENT_RESUME
from voxqueue.contracts import AgentStep, ToolCallJob, ToolOutcome
from voxqueue.once import Once
from workers.runtime import handoff
from workers.runtime.resources import Runtime


def record_in(once: Once, rt: Runtime, job: ToolCallJob, outcome: ToolOutcome) -> Once:
    """Add to ``once`` the outcome's store and the call's count in the join; the last result
    of ``once.run()`` is then how many calls of the step have an outcome."""
    ttl = rt.settings.turns.ttl_s
    join = rt.keys.tool_join(job.turn_id, job.step)
    return (once.call("SET", rt.keys.tool_outcome(job.turn_id, job.call_id),
                      outcome.model_dump_json(), "EX", ttl)
            .call("SADD", join, job.call_id)
            .call("EXPIRE", join, ttl)
            .call("SCARD", join))


def send_if_complete(rt: Runtime, job: ToolCallJob, counted: Any = None) -> bool:
    """Send the next step when every call of ``job``'s step has its outcome; returns whether
    it was sent. ``counted``: the count this call's own record returned (None: ask Redis)."""
    if counted is None:
        counted = rt.redis.scard(rt.keys.tool_join(job.turn_id, job.step))
    if int(counted) < job.calls:
        return False
    handoff.send(rt, AgentStep(turn_id=job.turn_id, step=job.step + 1, enqueued_at=time.time()),
                 AGENT_RESUME)
    return True


def read_outcomes(rt: Runtime, turn_id: str, call_ids: Sequence[str]) -> dict[str, ToolOutcome]:
    """The stored outcome of each call that has one, by call id (one round trip)."""
    if not call_ids:
        return {}
    raw = rt.redis.mget([rt.keys.tool_outcome(turn_id, c) for c in call_ids])
    return {c: ToolOutcome.model_validate_json(r) for c, r in zip(call_ids, raw, strict=True)
            if r is not None}
