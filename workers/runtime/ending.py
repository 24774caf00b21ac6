"""How a stage ends a turn that went wrong: the error, and a short spoken apology when the turn
speaks and time allows. Every stage ends turns this way."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from celery.exceptions import SoftTimeLimitExceeded

from voxqueue.contracts import ErrorCode, TtsJob, TurnEvent
from voxqueue.once import Fenced
from voxqueue.spoken.apologies import apology_for
from workers.runtime import completion, handoff
from workers.runtime.stage import Stage


def fail(stage: Stage, code: ErrorCode | str, message: str, *, apologize: bool = True,
         say: str | None = None) -> None:
    """Report an error and end the turn, after a short spoken apology when it speaks.

    ``say`` replaces the stock apology (the step cap explains itself).
    """
    stage.log.warning("turn failed", code=str(code), error=message)
    store = stage.rt.store
    if store.ended(stage.turn_id):
        return
    if stage.remaining() <= 0.1:  # the deadline, not the provider, ended this turn
        store.finish(stage.spec, "timeout", (
            ErrorCode.TIMEOUT, f"the turn passed its deadline in the {stage.queue} stage "
            f"({message})"))
        return
    if apologize and stage.spec.speak and stage.remaining() > 1:
        apologize_and_end(stage, code, message, say or apology_for(code))
        return
    store.finish(stage.spec, "error", (code, message), fence=stage.fence)


def apologize_and_end(stage: Stage, code: ErrorCode | str, message: str, text: str) -> None:
    """Say ``text`` as the turn's last sentence and end the turn with an error after it.

    The error and the reply are written once; the sentence and the close are idempotent, so
    an attempt that died half way through is completed by the next one.
    """
    rt = stage.rt
    now = time.time()
    reply = TurnEvent(type="reply", turn_id=stage.turn_id, ts=now,
                      data={"text": text, "apology": True})
    stage.once_with_event("apology", "error", {"code": str(code), "message": message}).call(
        "XADD", rt.keys.events(stage.turn_id), "*", "e", reply.model_dump_json()).run()
    piece = completion.allocate(rt, stage.turn_id, "apology")
    if not piece.sent:
        handoff.send(rt, TtsJob(turn_id=stage.turn_id, seq=piece.seq, text=text,
                                enqueued_at=now))
        completion.mark_sent(rt, stage.turn_id, piece.seq)
    completion.close(rt, stage.spec, end_status="error")


@contextmanager
def guard(stage: Stage) -> Iterator[None]:
    """End the turn with an error when the stage's code fails unexpectedly.

    Without this a bug would leave the turn silent until the deadline sweeper ends it.
    """
    try:
        yield
    except Fenced:
        stage.log.warning("a newer delivery of this job took over; this one stops")
    except SoftTimeLimitExceeded:
        fail(stage, ErrorCode.TIMEOUT, f"the {stage.queue} stage hit its time limit",
             apologize=False)
    except Exception as exc:
        stage.log.exception("stage failed", error=str(exc))
        fail(stage, ErrorCode.INTERNAL,
             f"the {stage.queue} stage failed: {exc.__class__.__name__}: {exc}")
