"""The TTS task: speak one sentence onto the turn's stream; the last one ends the turn."""

from __future__ import annotations

import time
from typing import Any

from celery import Task

from voxqueue.celery_config import TIME_LIMITS, TTS_SPEAK
from voxqueue.contracts import ErrorCode, EventType, TtsJob, TurnEvent
from voxqueue.observability.otel import span
from voxqueue.settings import MissingKeyError
from voxqueue.spoken import for_speech
from workers.app import app
from workers.runtime import completion, ending
from workers.runtime.retry import ProviderError
from workers.runtime.stage import Stage, begin
from workers.tts.chunking import rechunk


@app.task(name=TTS_SPEAK, bind=True, time_limit=TIME_LIMITS["tts"],
          soft_time_limit=TIME_LIMITS["tts"] - 10)
def speak(self: Task, job: dict[str, Any]) -> None:
    """Stream one sentence's audio as ``tts-chunk`` entries (seq, idx, attempt)."""
    tjob = TtsJob.model_validate(job)
    stage = begin(self, tjob, "tts", sentence=tjob.seq)
    if stage is None:
        return
    end: TurnEvent | None = None
    try:
        with ending.guard(stage):
            if not stage.sentence_spoken:
                end = _speak(stage, tjob)
    finally:
        # Spoken, failed or skipped, the sentence counts as done, so nothing waits for it, and
        # this job is done, in one step with its tts-end (a copy of the job that a newer
        # delivery superseded leaves all to the newer one).
        if completion.sentence_done(stage.rt, stage.spec, tjob.seq, fence=stage.fence,
                                    job_done=stage.rt.keys.job_done(stage.task_id)
                                    if stage.task_id else None, event=end,
                                    before_finish=lambda: stage.crash_point("tts.before-finish")):
            stage.crash_point("tts.after-done")


def _speak(stage: Stage, tjob: TtsJob) -> TurnEvent | None:
    """Stream the sentence's audio; its ``tts-end`` event when it was all spoken (written with
    the sentence's done mark), else None."""
    rt = stage.rt
    started = time.time()
    # Announced with the first audio, in its round trip (or before the end, when none comes).
    start: list[tuple[EventType, dict[str, Any]]] = [("tts-start", {
        "seq": tjob.seq, "queue_ms": stage.queue_ms(tjob), "chars": len(tjob.text),
        "text": tjob.text, "worker": stage.worker, "attempt": stage.attempt,
        "started_at": started})]
    ttfb_ms: float | None = None
    n_bytes = 0
    try:
        synth = rt.synthesizer
        # What the voice is given: the sentence as said, not as written (voxqueue/spoken).
        said, previous = tjob.text, tjob.previous_text
        if rt.settings.agent.speech_filter:
            said = for_speech(said, synth.reading)
            previous = for_speech(previous, synth.reading) if previous else None
        with span("tts.stream", seq=tjob.seq, provider=synth.name):
            chunks = rechunk(synth.stream(said, deadline=stage.spec.deadline,
                                          previous_text=previous)
                             if said.strip() else (),  # nothing to say: emoji only
                             busy_until=stage.listener_busy_until,
                             sleep=time.sleep if synth.arrives_by_itself else None)
            for idx, pcm in enumerate(chunks):
                if ttfb_ms is None:
                    ttfb_ms = round((time.time() - started) * 1000, 2)
                # Each write checks for barge-in, cancellation and the deadline: stop then.
                if not stage.emit_or_stop("tts-chunk", {
                        "seq": tjob.seq, "idx": idx, "attempt": stage.attempt,
                        "offset": n_bytes, "bytes": len(pcm)}, pcm=pcm, before=start,
                        audio_end=(tjob.seq, n_bytes + len(pcm))):
                    return None
                start = []
                n_bytes += len(pcm)
                if idx == 0:
                    stage.crash_point("tts.mid-stream")
    except (ProviderError, MissingKeyError) as exc:
        _announce(stage, start)
        code = ErrorCode.MISSING_KEY if isinstance(exc, MissingKeyError) else ErrorCode.TTS_FAILED
        # A short apology (if the voice works again: a second failure ends the turn), and this
        # sentence counts as done: it will not be spoken, so nothing waits for it.
        ending.fail(stage, code, str(exc))
        return None
    _announce(stage, start)
    stage.crash_point("tts.after-stream")
    return TurnEvent(type="tts-end", turn_id=stage.turn_id, data={
        "seq": tjob.seq, "ms": round((time.time() - started) * 1000, 2), "ttfb_ms": ttfb_ms,
        "bytes": n_bytes, "provider": synth.name})


def _announce(stage: Stage, start: list[tuple[EventType, dict[str, Any]]]) -> None:
    """``tts-start``, if no audio carried it."""
    for type_, data in start:
        stage.emit(type_, data)
