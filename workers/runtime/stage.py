"""A task's view of its turn (``Stage``) and the way in (``begin``): load the turn, bound
redelivery, fence stale attempts, honour cancel and deadline.

How a stage ends a turn that failed is ``workers.runtime.ending``; how it hands the turn to the
next queue is ``workers.runtime.handoff``; when a turn is complete is
``workers.runtime.completion``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import structlog
from celery import Task

from voxqueue.contracts import ErrorCode, EventType, TurnEvent, TurnSpec
from voxqueue.contracts.jobs import _Job
from voxqueue.once import Fence, Fenced, Once, deliver_in
from voxqueue.redis_conn import durable
from voxqueue.turns import STREAM_MAXLEN
from workers.runtime import completion
from workers.runtime.crash import crash_point
from workers.runtime.resources import Runtime
from workers.runtime.trust import spec_problem

log = structlog.get_logger("voxqueue.stage")

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
        #: For a TTS job: whether its sentence was already spoken, and until when (monotonic
        #: clock) the listener has the turn's earlier audio to play (read by ``begin``).
        self.sentence_spoken = False
        self.listener_busy_until: float | None = None
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
        """Writes made once per turn under ``name``, atomically, only by the newest attempt
        (see ``TurnStore.once``), and never after the turn's end (``run`` then returns None, as
        when already done): a late write of an ended turn (cancelled, overdue) would land among
        the next turn's messages, or after its ``run-end``."""
        once = self.rt.store.once(self.turn_id, name, self.fence)
        once.unless = self.rt.keys.ended(self.turn_id)
        return once

    def once_with_event(self, name: str, type: EventType, data: Mapping[str, Any]) -> Once:
        """``once(name)`` that also appends the event ``type``: add writes with ``.call``, then
        ``.run()``; the event and the writes happen together, once, and never after the turn's
        end (``run-end`` stays the last event)."""
        return self.event_in(self.once(name), type, data)

    def event_in(self, once: Once, type: EventType, data: Mapping[str, Any]) -> Once:
        """Add the event ``type`` to ``once``'s writes (written with them, or not at all)."""
        event = TurnEvent(type=type, turn_id=self.turn_id, data=dict(data))
        return once.call("XADD", self.rt.keys.events(self.turn_id), "MAXLEN", "~",
                         STREAM_MAXLEN, "*", "e", event.model_dump_json())

    def crash_point(self, name: str) -> None:
        """A place where a test may kill this process (``workers/runtime/crash.py``)."""
        crash_point(self.rt, name, self.spec)

    def complete(self) -> None:
        """This job is done: a copy delivered later (sent twice, or redelivered) is skipped.
        Only by the job's newest attempt: a zombie's work is not the job's (it stops here)."""
        try:
            Once(self.rt.redis, fence=self.fence).call(
                "SET", self.rt.keys.job_done(self.task_id), b"1", "EX",
                self.rt.settings.turns.ttl_s).run()
        except Fenced:
            self.log.warning("a newer delivery of this job took over; not marked done by this one")

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

    def emit_or_stop(self, type: EventType, data: Mapping[str, Any] | None = None,
                     pcm: bytes | None = None,
                     before: Sequence[tuple[EventType, Mapping[str, Any]]] = (),
                     audio_end: tuple[int, int] | None = None) -> bool:
        """Append an event and return True; or, when the turn has ended, was cancelled or is
        past its deadline, write nothing, end it if it is not (as ``should_stop``) and return
        False. One round trip, the check included: for the work that emits all along.
        ``before``: events appended just before it, in the same round trip; ``audio_end``:
        see ``TurnStore.emit_unless_stopped``."""
        if self.remaining() <= 0:
            self.should_stop()  # ends the turn (timeout, unless it ended otherwise first)
            return False
        earlier = [TurnEvent(type=t, turn_id=self.turn_id, data=dict(d)) for t, d in before]
        outcome = self.rt.store.emit_unless_stopped(self.turn_id, type, data, pcm, self.fence,
                                                    before=earlier, audio_end=audio_end)
        if outcome == "cancelled":
            self.rt.store.finish(self.spec, "cancelled")
        return outcome == "emitted"

    def finish(self, status: str = "ok", **data: Any) -> None:
        """End the turn (only as the job's newest attempt: raises ``Fenced`` otherwise)."""
        self.rt.store.finish(self.spec, status, data=data, fence=self.fence)

    def queue_ms(self, job: _Job) -> float:
        """Milliseconds from the job's sending to the task's start (the queue hop)."""
        if not job.enqueued_at:
            return 0.0
        return round(max(0.0, self.started_at - job.enqueued_at) * 1000, 2)


def delivery_tag(task: Task) -> str | None:
    """The broker's tag of the message ``task`` runs from: a redelivery keeps it, a copy sent
    again gets a new one (None when run without a broker)."""
    request = task.request
    tag = (getattr(request, "properties", None) or {}).get("delivery_tag")
    return str(tag) if tag is not None else None


def unacked_key(task: Task) -> str:
    """kombu's hash of the messages delivered and not yet acknowledged, by tag."""
    options = task.app.conf.broker_transport_options or {}
    return f"{options.get('global_keyprefix', '')}{options.get('unacked_key', 'unacked')}"


def runtime_of(task: Task) -> Runtime:
    """The Runtime of the worker process running ``task`` (built once by its app)."""
    rt: Runtime = task.app.runtime
    return rt


def begin(task: Task, job: _Job, queue: str, *, sentence: int | None = None) -> Stage | None:
    """Enter a stage, or None when the job must not be worked on (turn gone or ended, job done,
    over the delivery cap).

    One round trip to Redis: the spec, the delivery count (this attempt's fence), the end and
    cancel flags, the job's done marker and, given a ``sentence``, whether it was already
    spoken (``Stage.sentence_spoken``) and how much of the turn's audio the listener has yet
    to play before it (``Stage.listener_busy_until``).
    """
    started = time.time()
    rt = runtime_of(task)
    k = rt.keys
    task_id = task.request.id or job.task_id()
    pipe = rt.redis.pipeline(transaction=False)
    pipe.hget(k.turn(job.turn_id), "spec")
    deliver_in(pipe, deliveries=k.deliveries(task_id), owner=k.job_owner(task_id),
               unacked=unacked_key(task), tag=delivery_tag(task), ttl_s=rt.settings.turns.ttl_s)
    pipe.exists(k.ended(job.turn_id), k.cancel(job.turn_id))
    pipe.exists(k.job_done(task_id))
    if sentence is not None:
        pipe.sismember(k.tts_done(job.turn_id), str(sentence))
        if sentence > 0:
            rt.store.audio_ahead_in(pipe, job.turn_id, sentence)
    wait = durable(rt.redis)
    if wait is not None:  # the attempt is the fence of every write: a failover must keep it
        pipe.execute_command("WAIT", wait.replicas, wait.timeout_ms(rt.redis))
    replies = pipe.execute()
    if wait is not None:
        wait.acked(replies.pop(), "a job's delivery", rt.redis)
    raw_spec, attempt, flags, done, *spoken = replies
    if raw_spec is None:
        log.warning("turn not found; dropping task", turn_id=job.turn_id, queue=queue)
        return None
    if not attempt:
        log.info("another copy of this job is running; skipping this one", task_id=task_id,
                 queue=queue)
        return None
    spec = TurnSpec.model_validate_json(raw_spec)
    stage = Stage(rt, spec, queue, int(attempt), started_at=started,
                  worker=task.request.hostname or "", task_id=task_id)
    if spoken:
        stage.sentence_spoken = bool(spoken[0])
        if len(spoken) == 3:
            ahead = rt.store.audio_ahead(spoken[1], spoken[2])
            stage.listener_busy_until = time.monotonic() + ahead if ahead > 0 else None
    structlog.contextvars.bind_contextvars(session_id=spec.session_id, device=spec.device)
    if done:
        stage.log.info("job already done; skipping this copy")
        if sentence is not None:  # its process may have died before ending the turn
            completion.finish_if_spoken(rt, spec)
        return None
    if (problem := spec_problem(spec, rt.settings, k)) is not None:
        stage.log.error("turn refused", problem=problem)
        rt.store.finish(spec, "error", (ErrorCode.INVALID_INPUT,
                                        f"the {queue} stage refused the turn: {problem}"))
        return None
    if flags and stage.should_stop():  # ended or cancelled: let should_stop say which
        return None
    if stage.attempt > rt.settings.redis.max_deliveries:
        stage.log.error("task delivered too many times", attempts=stage.attempt)
        rt.store.finish(spec, "error", (
            ErrorCode.REDELIVERY_CAP,
            f"the {queue} stage failed {stage.attempt - 1} times (its worker died); giving up"))
        return None
    if stage.remaining() <= 0 and stage.should_stop():
        return None
    stage.crash_point(f"{queue}.after-claim")
    return stage

