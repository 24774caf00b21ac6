"""The STT task: fetch the utterance by its claim check, transcribe it, hand over to the agent."""

from __future__ import annotations

import time
from typing import Any

from celery import Task

from voxqueue.celery_config import STT_TRANSCRIBE, TIME_LIMITS
from voxqueue.contracts import AgentStep, ErrorCode, SttJob, TurnEvent
from voxqueue.observability.otel import span
from voxqueue.settings import MissingKeyError
from workers.app import app
from workers.intents import matcher_for
from workers.intents.endings import sounds_unfinished
from workers.runtime import ending, handoff
from workers.runtime.retry import ProviderError
from workers.runtime.stage import Stage, begin
from workers.stt import listening


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
    rt, spec = stage.rt, stage.spec
    streamed = spec.audio_stream
    ended: dict[str, Any] = {}
    try:
        transcriber = rt.transcriber
        # One round trip: the start announced, an earlier attempt's transcript and the audio.
        pipe = rt.redis.pipeline(transaction=False)
        rt.store.emit_in(pipe, TurnEvent(type="stt-start", turn_id=stage.turn_id, data={
            "queue_ms": stage.queue_ms(sjob), "provider": transcriber.name,
            "audio_s": spec.audio_seconds, "streamed": streamed}), stage.fence)
        pipe.hget(rt.keys.turn(stage.turn_id), "transcript")
        if not streamed and spec.audio_key is not None:
            pipe.get(spec.audio_key)
        started_event, said, *audio = pipe.execute()
        rt.store.emitted(stage.turn_id, started_event)
        if said is not None:  # an earlier attempt transcribed it and died before handing over
            _hand_over(stage)
            return
        pcm = None if streamed else (bytes(audio[0]) if audio and audio[0] else None)
        if not streamed and not pcm:
            ending.fail(stage, ErrorCode.AUDIO_MISSING,
                        "the turn's audio is gone (expired or never stored)")
            return
        ready = None  # a streamed command's transcript, decoded at its last pause
        if pcm is None:
            live, at_pauses = _recognition(stage)
            heard = listening.listen(stage, transcriber, live=live, decode_at_pauses=at_pauses,
                                     complete=lambda text: bool(matcher_for(rt.tools).match(text)),
                                     unfinished=sounds_unfinished)
            pcm, ready = heard.pcm, heard.ready
            if not pcm:
                ending.fail(stage, ErrorCode.AUDIO_INVALID, "the streamed audio is empty")
                return
            ended.update(speech_ended_at=heard.ended_at, decoded_at_pause=heard.at_pause,
                         heard_live=heard.live)
        started = time.time()
        with span("stt.transcribe", provider=transcriber.name):
            transcript = ready or transcriber.transcribe(pcm, deadline=stage.spec.deadline)
    except MissingKeyError as exc:
        ending.fail(stage, ErrorCode.MISSING_KEY, str(exc))
        return
    except ProviderError as exc:
        ending.fail(stage, ErrorCode.STT_FAILED, str(exc))
        return
    except listening.SpeechStopped as exc:
        if not exc.aborted:
            ending.fail(stage, exc.code, str(exc), apologize=False)
        return
    # (A turn cancelled meanwhile is ended by the agent's first look at it: no round trip here.)
    ended.update({"text": transcript.text, "ms": round((time.time() - started) * 1000, 1),
                  "ttfb_ms": transcript.ttfb_ms, "audio_s": round(len(pcm) / 32000, 2)})
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


def _recognition(stage: Stage) -> tuple[bool, bool]:
    """How a streamed command is recognized while it is spoken: (heard live by an engine that
    can, decoded whole at each pause by one that cannot). ``auto``: live wherever an engine
    offers it (pocketsphinx; OpenAI's Realtime session), whole at pauses offline only (a cloud
    engine bills each request)."""
    settings = stage.rt.settings
    choice = settings.providers.stt_decode_at_pauses
    offline = settings.providers.in_use()["stt"] in ("whisper", "pocketsphinx")
    return choice != "off", choice == "on" or (choice == "auto" and offline)
