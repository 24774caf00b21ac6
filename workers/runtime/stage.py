"""The guard every task runs under: load the turn, bound redelivery, honour cancel and deadline."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import structlog
from celery import Task
from celery.exceptions import SoftTimeLimitExceeded

from voxqueue.contracts import ErrorCode, EventType, TtsJob, TurnSpec
from voxqueue.contracts.jobs import _Job
from workers.runtime.resources import Runtime

log = structlog.get_logger("voxqueue.stage")

APOLOGY = "Sorry, something went wrong and I can't answer that right now."
APOLOGIES: dict[str, str] = {
    ErrorCode.STT_NO_TEXT: "Sorry, I didn't catch that.",
    ErrorCode.AUDIO_INVALID: "Sorry, I couldn't hear that recording.",
    ErrorCode.MISSING_KEY: "Sorry, I'm not set up to answer that: an API key is missing.",
}


class Stage:
    """One task's view of its turn: events, stop checks and the turn's end."""

    def __init__(self, rt: Runtime, spec: TurnSpec, queue: str, attempt: int,
                 started_at: float | None = None, worker: str = "") -> None:
        self.rt = rt
        self.worker = worker  # the Celery worker's name, e.g. "tts@host"
        self.started_at = started_at if started_at is not None else time.time()
        self.spec = spec
        self.queue = queue
        self.attempt = attempt
        self.log = log.bind(turn_id=spec.turn_id, session_id=spec.session_id,
                            device=spec.device, queue=queue)

    @property
    def turn_id(self) -> str:
        return self.spec.turn_id

    def emit(self, type: EventType, data: Mapping[str, Any] | None = None,
             pcm: bytes | None = None) -> None:
        self.rt.store.emit(self.turn_id, type, data, pcm)

    def remaining(self) -> float:
        """Seconds left before the deadline."""
        return self.spec.deadline - time.time()

    def should_stop(self) -> bool:
        """True when the turn has ended, was cancelled or is past its deadline (ending it then)."""
        store = self.rt.store
        k = self.rt.keys
        if self.rt.redis.exists(k.ended(self.turn_id), k.cancel(self.turn_id)):  # one round trip
            if not store.ended(self.turn_id):  # cancelled, not yet ended
                store.finish(self.spec, "cancelled")
            return True
        if self.remaining() <= 0:
            store.finish(self.spec, "timeout", (
                ErrorCode.TIMEOUT, f"the turn passed its deadline in the {self.queue} stage"))
            return True
        return False

    def finish(self, status: str = "ok", **data: Any) -> None:
        self.rt.store.finish(self.spec, status, data=data)

    def fail(self, code: ErrorCode | str, message: str, *, apologize: bool = True,
             say: str | None = None) -> None:
        """Report an error and end the turn, after a short spoken apology when it speaks.

        ``say`` replaces the stock apology (the step cap explains itself).
        """
        self.log.warning("turn failed", code=str(code), error=message)
        store = self.rt.store
        if store.ended(self.turn_id):
            return
        if self.remaining() <= 0.1:  # the deadline, not the provider, ended this turn
            store.finish(self.spec, "timeout", (
                ErrorCode.TIMEOUT, f"the turn passed its deadline in the {self.queue} stage "
                f"({message})"))
            return
        if apologize and self.spec.speak and self.remaining() > 1 and store.once(
                self.turn_id, "apology"):
            store.emit(self.turn_id, "error", {"code": str(code), "message": message})
            from workers.tts import progress

            text = say or APOLOGIES.get(str(code), APOLOGY)
            store.emit(self.turn_id, "reply", {"text": text, "apology": True})
            seq, _new = progress.allocate(self.rt, self.turn_id, "apology")
            self.send(TtsJob(turn_id=self.turn_id, seq=seq, text=text, enqueued_at=time.time()))
            progress.close(self.rt, self.spec, end_status="error")
            return
        store.finish(self.spec, "error", (code, message))

    @contextmanager
    def guard(self) -> Iterator[None]:
        """End the turn with an error when the stage's code fails unexpectedly.

        Without this a bug would leave the turn silent until the deadline sweeper ends it.
        """
        try:
            yield
        except SoftTimeLimitExceeded:
            self.fail(ErrorCode.TIMEOUT, f"the {self.queue} stage hit its time limit",
                      apologize=False)
        except Exception as exc:
            self.log.exception("stage failed", error=str(exc))
            self.fail(ErrorCode.INTERNAL,
                      f"the {self.queue} stage failed: {exc.__class__.__name__}: {exc}")

    def send(self, job: _Job, task_name: str | None = None) -> None:
        """Hand the turn to the next stage."""
        from voxqueue.celery_config import AGENT_STEP, STT_TRANSCRIBE, TTS_SPEAK
        from voxqueue.tracing import inject
        from workers.app import app

        if task_name is None:
            task_name = {"TtsJob": TTS_SPEAK, "AgentStep": AGENT_STEP,
                         "SttJob": STT_TRANSCRIBE}[type(job).__name__]
        app.send_task(task_name, args=[job.model_dump(mode="json")], argsrepr=job.describe(),
                      headers=inject(), ignore_result=True)

    def queue_ms(self, job: _Job) -> float:
        """Milliseconds from the job's sending to the task's start (the queue hop)."""
        if not job.enqueued_at:
            return 0.0
        return round(max(0.0, self.started_at - job.enqueued_at) * 1000, 2)


def begin(task: Task, job: _Job, queue: str) -> Stage | None:
    """Enter a stage, or None when the turn must not be worked on (gone, ended, over cap).

    One round trip to Redis: the spec, the delivery count and the end and cancel flags.
    """
    from workers.app import app

    started = time.time()
    rt: Runtime = app.runtime
    k = rt.keys
    task_id = task.request.id or f"{job.turn_id}:{queue}"
    pipe = rt.redis.pipeline(transaction=False)
    pipe.hget(k.turn(job.turn_id), "spec")
    pipe.incr(k.deliveries(task_id))
    pipe.expire(k.deliveries(task_id), rt.settings.turn_ttl_s)
    pipe.exists(k.ended(job.turn_id), k.cancel(job.turn_id))
    raw_spec, attempt, _, flags = pipe.execute()
    if raw_spec is None:
        log.warning("turn not found; dropping task", turn_id=job.turn_id, queue=queue)
        return None
    spec = TurnSpec.model_validate_json(raw_spec)
    stage = Stage(rt, spec, queue, int(attempt), started_at=started,
                  worker=task.request.hostname or "")
    structlog.contextvars.bind_contextvars(session_id=spec.session_id, device=spec.device)
    if flags and stage.should_stop():  # ended or cancelled: let should_stop say which
        return None
    if stage.attempt > rt.settings.max_deliveries:
        stage.log.error("task delivered too many times", attempts=stage.attempt)
        rt.store.finish(spec, "error", (
            ErrorCode.REDELIVERY_CAP,
            f"the {queue} stage failed {stage.attempt - 1} times (its worker died); giving up"))
        return None
    if stage.remaining() <= 0 and stage.should_stop():
        return None
    return stage
