"""Handing a turn to the next queue: every job is sent under its own task id, so a copy sent
again after a crash is the same job (the receiver runs it once; ``Stage.complete``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from voxqueue.celery_config import AGENT_STEP, STT_TRANSCRIBE, TTS_SPEAK
from voxqueue.contracts.jobs import _Job
from voxqueue.observability.otel import inject
from workers.runtime.resources import Runtime
from workers.runtime.stage import Stage

_TASK_OF = {"TtsJob": TTS_SPEAK, "AgentStep": AGENT_STEP, "SttJob": STT_TRANSCRIBE}


def send(rt: Runtime, job: _Job, task_name: str | None = None, **options: Any) -> None:
    """Send ``job`` to its queue's task (by default the one its type goes to)."""
    name = task_name or _TASK_OF[type(job).__name__]
    rt.celery.send_task(name, args=[job.model_dump(mode="json")], argsrepr=job.describe(),
                        headers=inject(), ignore_result=True, task_id=job.task_id(), **options)


def send_once(stage: Stage, job: _Job, task_name: str | None = None, **options: Any) -> None:
    """Send ``job`` unless an earlier attempt of this stage did. A crash between the send
    and its mark sends it again, under the same task id: the receiver runs it once."""
    what = f"sent:{job.task_id()}"
    if sent_before(stage, what):
        return
    send(stage.rt, job, task_name, **options)
    stage.crash_point(f"{stage.queue}.after-send")
    mark_sent(stage, what)


def sent_before(stage: Stage, what: str) -> bool:
    """Whether an earlier attempt of this stage marked ``what`` sent. A first delivery has no
    earlier attempt: it is not asked (no round trip)."""
    rt = stage.rt
    return stage.attempt > 1 and bool(rt.redis.exists(rt.keys.marker(stage.turn_id, what)))


def mark_sent(stage: Stage, what: str) -> None:
    rt = stage.rt
    rt.redis.set(rt.keys.marker(stage.turn_id, what), b"1", ex=rt.settings.turns.ttl_s)


def fan_out(stage: Stage, task_name: str, jobs: Sequence[_Job], what: str) -> None:
    """Send ``jobs`` to run in parallel, once per stage (``what`` names the fan-out). They
    join by themselves (``workers/runtime/join.py``): no Celery chord, whose join in the result
    backend a crash can strand. Every job has its fixed task id, so a fan-out sent again by a
    stage that died before marking it sent is the same jobs: each runs once."""
    if sent_before(stage, what):
        return
    for job in jobs:
        send(stage.rt, job, task_name)
    stage.crash_point(f"{stage.queue}.after-send")
    mark_sent(stage, what)
