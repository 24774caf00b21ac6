"""The STT task: fetch the utterance by its claim check, transcribe it, hand over to the agent."""

from __future__ import annotations

import time
from typing import Any

from celery import Task

from voxqueue.celery_config import STT_TRANSCRIBE, TIME_LIMITS
from voxqueue.contracts import AgentStep, ErrorCode, SttJob
from voxqueue.otel import span
from voxqueue.settings import MissingKeyError
from workers.app import app
from workers.runtime import ending, handoff
from workers.runtime.retry import ProviderError
from workers.runtime.stage import Stage, begin


@app.task(name=STT_TRANSCRIBE, bind=True, time_limit=TIME_LIMITS["stt"],
          soft_time_limit=TIME_LIMITS["stt"] - 10)
def transcribe(self: Task, job: dict[str, Any]) -> None:
    """Transcribe the turn's audio and start its agent loop."""
    sjob = SttJob.model_validate(job)
    stage = begin(self, sjob, "stt")
    if stage is None:
        return
    with ending.guard(stage):
        _transcribe(stage, sjob)
        stage.complete()


def _transcribe(stage: Stage, sjob: SttJob) -> None:
    rt = stage.rt
    said: Any = rt.redis.hget(rt.keys.turn(stage.turn_id), "transcript")
    if said is not None:  # an earlier attempt transcribed it and died before handing over
        _hand_over(stage)
        return
    pcm = rt.store.audio(stage.spec)
    if not pcm:
        ending.fail(stage, ErrorCode.AUDIO_MISSING,
                    "the turn's audio is gone (expired or never stored)")
        return
    try:
        transcriber = rt.transcriber
        stage.emit("stt-start", {"queue_ms": stage.queue_ms(sjob), "provider": transcriber.name,
                                 "audio_s": stage.spec.audio_seconds})
        started = time.time()
        with span("stt.transcribe", provider=transcriber.name):
            transcript = transcriber.transcribe(pcm, deadline=stage.spec.deadline)
    except MissingKeyError as exc:
        ending.fail(stage, ErrorCode.MISSING_KEY, str(exc))
        return
    except ProviderError as exc:
        ending.fail(stage, ErrorCode.STT_FAILED, str(exc))
        return
    if stage.should_stop():
        return
    ended = {"text": transcript.text, "ms": round((time.time() - started) * 1000, 1),
             "ttfb_ms": transcript.ttfb_ms}
    if not transcript.text:
        stage.emit("stt-end", ended)
        ending.fail(stage, ErrorCode.STT_NO_TEXT, "no speech was recognized in the audio")
        return
    stage.once_with_event("transcript", "stt-end", ended).call(
        "HSET", rt.keys.turn(stage.turn_id), "transcript", transcript.text.encode()).run()
    stage.crash_point("stt.after-transcript")
    _hand_over(stage)


def _hand_over(stage: Stage) -> None:
    if stage.spec.until == "transcript":  # speech to text only: the transcript is the answer
        stage.rt.store.finish(stage.spec, "ok")
        return
    handoff.send_once(stage, AgentStep(turn_id=stage.turn_id, step=1, enqueued_at=time.time()))
