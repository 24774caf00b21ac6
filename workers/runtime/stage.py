"""The guard every task runs under: load the turn, bound redelivery, fence stale attempts, honour
cancel and deadline, and hand the turn on."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import structlog
from celery import Task
from celery.exceptions import SoftTimeLimitExceeded

from voxqueue.contracts import ErrorCode, EventType, TtsJob, TurnEvent, TurnSpec
from voxqueue.contracts.jobs import _Job
from voxqueue.effects import Fence, Fenced, Once
from voxqueue.turns import STREAM_MAXLEN
from workers.runtime import completion
from workers.runtime.crash import crash_point
from workers.runtime.resources import Runtime
from workers.runtime.trust import spec_problem

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
                 started_at: float | None = None, worker: str = "", task_id: str = "") -> None:
        self.rt = rt
        self.worker = worker  # the Celery worker's name, e.g. "tts@host"
        self.started_at = started_at if started_at is not None else time.time()
        self.spec = spec
        self.queue = queue
        self.attempt = attempt
        self.task_id = task_id
        #: Only this job's newest delivery may write; a stale one is stopped (``Fenced``).
        self.fence = Fence(rt.keys.deliveries(task_id), attempt) if task_id else None
        self.log = log.bind(turn_id=spec.turn_id, session_id=spec.session_id,
                            device=spec.device, queue=queue, attempt=attempt)

    @property
    def turn_id(self) -> str:
        return self.spec.turn_id

    def emit(self, type: EventType, data: Mapping[str, Any] | None = None,
             pcm: bytes | None = None) -> None:
        """Append an event to the turn (raises ``Fenced`` if a newer attempt took over)."""
        self.rt.store.emit(self.turn_id, type, data, pcm, fence=self.fence)

    def once(self, name: str) -> Once:
        """Writes made once per turn under ``name``, atomically, and only by the newest attempt
        (see ``TurnStore.once``)."""
        return self.rt.store.once(self.turn_id, name, self.fence)

    def once_with_event(self, name: str, type: EventType, data: Mapping[str, Any]) -> Once:
        """``once(name)`` that also appends the event ``type``: add writes with ``.call``, then
        ``.run()``; the event and the writes happen together, once, and never after the turn's
        end (``run`` then returns None, as when already done)."""
        event = TurnEvent(type=type, turn_id=self.turn_id, data=dict(data))
        once = self.once(name)
        once.unless = self.rt.keys.ended(self.turn_id)  # run-end stays the last event
        return once.call("XADD", self.rt.keys.events(self.turn_id), "MAXLEN", "~",
                         STREAM_MAXLEN, "*", "e", event.model_dump_json())

    def crash_point(self, name: str) -> None:
        """A place where a test may kill this process (``workers/runtime/crash.py``)."""
        crash_point(self.rt, name, self.spec)

    def is_current(self) -> bool:
        """Whether this is still the job's newest delivery (no newer one took over)."""
        if self.fence is None:
            return True
        return bool(self.rt.redis.get(self.fence.key) == str(self.attempt).encode())

    def complete(self) -> None:
        """This job is done: a copy delivered later (sent twice, or redelivered) is skipped."""
        self.rt.redis.set(self.rt.keys.job_done(self.task_id), b"1",
                          ex=self.rt.settings.turn_ttl_s)

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
        if apologize and self.spec.speak and self.remaining() > 1:
            text = say or APOLOGIES.get(str(code), APOLOGY)
            self.apologize(code, message, text)
            return
        store.finish(self.spec, "error", (code, message))

    def apologize(self, code: ErrorCode | str, message: str, text: str) -> None:
        """Say ``text`` as the turn's last sentence and end the turn with an error after it.

        The error and the reply are written once; the sentence and the close are idempotent, so
        an attempt that died half way through is completed by the next one.
        """
        now = time.time()
        events = self.rt.keys.events(self.turn_id)
        reply = TurnEvent(type="reply", turn_id=self.turn_id, ts=now,
                          data={"text": text, "apology": True})
        self.once_with_event("apology", "error", {"code": str(code), "message": message}).call(
            "XADD", events, "*", "e", reply.model_dump_json()).run()
        seq, _new, sent = completion.allocate(self.rt, self.turn_id, "apology")
        if not sent:
            self.send(TtsJob(turn_id=self.turn_id, seq=seq, text=text, enqueued_at=now))
            completion.mark_sent(self.rt, self.turn_id, seq)
        completion.close(self.rt, self.spec, end_status="error")

    @contextmanager
    def guard(self) -> Iterator[None]:
        """End the turn with an error when the stage's code fails unexpectedly.

        Without this a bug would leave the turn silent until the deadline sweeper ends it.
        """
        try:
            yield
        except Fenced:
            self.log.warning("a newer delivery of this job took over; this one stops")
        except SoftTimeLimitExceeded:
            self.fail(ErrorCode.TIMEOUT, f"the {self.queue} stage hit its time limit",
                      apologize=False)
        except Exception as exc:
            self.log.exception("stage failed", error=str(exc))
            self.fail(ErrorCode.INTERNAL,
                      f"the {self.queue} stage failed: {exc.__class__.__name__}: {exc}")

    def send(self, job: _Job, task_name: str | None = None, **options: Any) -> None:
        """Hand the turn to the next stage, under the job's own task id (a copy sent again
        after a crash is the same job)."""
        from voxqueue.celery_config import AGENT_STEP, STT_TRANSCRIBE, TTS_SPEAK
        from voxqueue.otel import inject
        from workers.app import app

        if task_name is None:
            task_name = {"TtsJob": TTS_SPEAK, "AgentStep": AGENT_STEP,
                         "SttJob": STT_TRANSCRIBE}[type(job).__name__]
        app.send_task(task_name, args=[job.model_dump(mode="json")], argsrepr=job.describe(),
                      headers=inject(), ignore_result=True, task_id=job.task_id(), **options)

    def send_once(self, job: _Job, task_name: str | None = None, **options: Any) -> None:
        """Send ``job`` unless an earlier attempt of this stage did. A crash between the send
        and its mark sends it again, under the same task id: the receiver runs it once."""
        marker = self.rt.keys.marker(self.turn_id, f"sent:{job.task_id()}")
        if self.rt.redis.exists(marker):
            return
        self.send(job, task_name, **options)
        self.crash_point(f"{self.queue}.after-send")
        self.rt.redis.set(marker, b"1", ex=self.rt.settings.turn_ttl_s)

    def queue_ms(self, job: _Job) -> float:
        """Milliseconds from the job's sending to the task's start (the queue hop)."""
        if not job.enqueued_at:
            return 0.0
        return round(max(0.0, self.started_at - job.enqueued_at) * 1000, 2)


def begin(task: Task, job: _Job, queue: str) -> Stage | None:
    """Enter a stage, or None when the job must not be worked on (turn gone or ended, job done,
    over the delivery cap).

    One round trip to Redis: the spec, the delivery count (this attempt's fence), the end and
    cancel flags and the job's done marker.
    """
    from workers.app import app

    started = time.time()
    rt: Runtime = app.runtime
    k = rt.keys
    task_id = task.request.id or job.task_id()
    pipe = rt.redis.pipeline(transaction=False)
    pipe.hget(k.turn(job.turn_id), "spec")
    pipe.incr(k.deliveries(task_id))
    pipe.expire(k.deliveries(task_id), rt.settings.turn_ttl_s)
    pipe.exists(k.ended(job.turn_id), k.cancel(job.turn_id))
    pipe.exists(k.job_done(task_id))
    raw_spec, attempt, _, flags, done = pipe.execute()
    if raw_spec is None:
        log.warning("turn not found; dropping task", turn_id=job.turn_id, queue=queue)
        return None
    spec = TurnSpec.model_validate_json(raw_spec)
    stage = Stage(rt, spec, queue, int(attempt), started_at=started,
                  worker=task.request.hostname or "", task_id=task_id)
    structlog.contextvars.bind_contextvars(session_id=spec.session_id, device=spec.device)
    if done:
        stage.log.info("job already done; skipping this copy")
        return None
    if (problem := spec_problem(spec, rt.settings, k)) is not None:
        stage.log.error("turn refused", problem=problem)
        rt.store.finish(spec, "error", (ErrorCode.INVALID_INPUT,
                                        f"the {queue} stage refused the turn: {problem}"))
        return None
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
    stage.crash_point(f"{queue}.after-claim")
    return stage

