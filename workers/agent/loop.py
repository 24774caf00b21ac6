"""One step of the agent loop: call the model with the whole history, then either fan the tool
calls out as a chord (whose callback is the next step) or speak the final reply."""

from __future__ import annotations

import json
import time
from typing import Any

from celery import chord

from voxqueue.celery_config import AGENT_RESUME, AGENT_STEP, TOOLS_RUN
from voxqueue.contracts import AgentStep, ErrorCode, ToolCallJob
from voxqueue.settings import MissingKeyError
from voxqueue.tracing import span
from workers.agent import messages as msg
from workers.agent.context import prepare_context
from workers.agent.history import History
from workers.agent.providers import Answer, ToolCallRequest
from workers.agent.speech import Speaker
from workers.runtime.retry import ProviderError
from workers.runtime.stage import Stage
from workers.tts import progress

#: How long a turn waiting for its session's previous turn waits between tries, in seconds.
SESSION_BUSY_RETRY_S = 0.2


def history_of(stage: Stage) -> History:
    rt = stage.rt
    return History(rt.redis, rt.keys, stage.spec.session_id, rt.settings.session_ttl_s)


def acquire_session(stage: Stage, job: AgentStep) -> bool:
    """Take the session for this turn, or re-queue the first step to try again shortly.

    Two turns of one session never interleave: the lock is held from the first step until the
    reply is in the history (or the turn ends).
    """
    rt, spec = stage.rt, stage.spec
    key = rt.keys.session_lock(spec.session_id)
    ttl = max(1, int(stage.remaining()) + 5)
    if rt.redis.set(key, spec.turn_id.encode(), nx=True, ex=ttl):
        return True
    holder: Any = rt.redis.get(key)
    if holder is not None and holder.decode() == spec.turn_id:
        return True
    from voxqueue.tracing import inject
    from workers.app import app

    app.send_task(AGENT_STEP, args=[job.model_dump(mode="json")], argsrepr=job.describe(),
                  countdown=SESSION_BUSY_RETRY_S, headers=inject(), ignore_result=True)
    return False


def start_turn(stage: Stage) -> None:
    """Put the turn's opening messages in the history, once: pending alerts, then the user."""
    rt, spec = stage.rt, stage.spec
    if not rt.store.once(spec.turn_id, "opened"):
        return
    history = history_of(stage)
    opening: list[msg.Message] = []
    if len(history) == 0:
        opening.append(msg.system(rt.settings.system_prompt))
    alert_keys = [rt.keys.alerts(spec.session_id)]
    if spec.device:
        alert_keys.append(rt.keys.device_alerts(spec.device))
    pipe = rt.redis.pipeline(transaction=True)
    for alerts_key in alert_keys:
        pipe.lrange(alerts_key, 0, -1)
        pipe.delete(alerts_key)
    drained = pipe.execute()
    pending = [raw for found in drained[::2] for raw in found]
    for raw in pending:
        opening.append(msg.system(f"Monitor alert: {raw.decode()}"))
        stage.emit("alert", {"text": raw.decode()})
    if spec.input == "text":
        text = spec.text or ""
    else:
        said: Any = rt.redis.hget(rt.keys.turn(spec.turn_id), "transcript")
        text = said.decode() if said else ""
    opening.append(msg.user(text))
    history.extend(opening)
    stage.emit("agent-step", {"step": 0, "alerts": len(pending), "transcript": text})


def run_step(stage: Stage, job: AgentStep) -> None:
    """Call the model once and act on its answer."""
    rt, spec, step = stage.rt, stage.spec, job.step
    history = history_of(stage)
    stage.emit("agent-step", {"step": step, "queue_ms": stage.queue_ms(job)})
    answer = _answer(stage, step, history)
    if answer is None or stage.should_stop():
        return
    if answer.tool_calls and step >= rt.settings.max_steps:
        text = (f"Sorry, I couldn't finish that: I stopped after {rt.settings.max_steps} steps "
                "without an answer.")
        if rt.store.once(spec.turn_id, f"history-{step}"):
            history.append(msg.assistant(text))
        _give_up(stage, ErrorCode.LLM_STEP_CAP,
                 f"the agent loop reached its cap of {rt.settings.max_steps} steps", say=text)
        return
    if answer.tool_calls:
        if rt.store.once(spec.turn_id, f"history-{step}"):
            history.append(msg.assistant_tool_calls(
                [c.as_dict() for c in answer.tool_calls], answer.text or None))
        _dispatch_tools(stage, step, answer.tool_calls)
        return
    if not answer.text:
        _give_up(stage, ErrorCode.LLM_FAILED, "the model returned an empty answer")
        return
    _final_reply(stage, step, answer.text, history)


def _answer(stage: Stage, step: int, history: History) -> Answer | None:
    """The model's answer for this step: stored once, so a redelivered step reuses it."""
    rt, spec = stage.rt, stage.spec
    turn_key = rt.keys.turn(spec.turn_id)
    field = f"answer:{step}"
    saved: Any = rt.redis.hget(turn_key, field)
    if saved is not None:
        data = json.loads(saved)
        answer = Answer(text=data["text"],
                        tool_calls=[ToolCallRequest(**c) for c in data["calls"]])
        Speaker(stage, step).finish(answer.text)  # re-sends only what was never sent
        return answer
    speaker = Speaker(stage, step)
    try:
        model = rt.chat_model
        stage.emit("llm-start", {"step": step, "provider": model.name})
        started = time.perf_counter()
        messages = prepare_context(stage, history)
        with span("llm.complete", step=step, provider=model.name):
            answer = model.complete(messages, rt.tools.schemas(), deadline=spec.deadline,
                                    on_text=speaker.on_text)
    except MissingKeyError as exc:
        _give_up(stage, ErrorCode.MISSING_KEY, str(exc))
        return None
    except ProviderError as exc:
        _give_up(stage, ErrorCode.LLM_FAILED, str(exc))
        return None
    stage.emit("llm-end", {
        "step": step, "ms": round((time.perf_counter() - started) * 1000, 2),
        "ttfb_ms": answer.ttfb_ms, "text": answer.text, "usage": answer.usage,
        "finish_reason": answer.finish_reason,
        "tool_calls": [c.as_dict() for c in answer.tool_calls]})
    rt.redis.hsetnx(turn_key, field, json.dumps(
        {"text": answer.text, "calls": [c.as_dict() for c in answer.tool_calls]}))
    if not (answer.tool_calls and step >= rt.settings.max_steps):
        speaker.finish(answer.text)
    return answer


def _give_up(stage: Stage, code: ErrorCode, message: str, say: str | None = None) -> None:
    """End the turn with an error (spoken); the session is free for its next turn at once."""
    stage.rt.store.release_session(stage.spec.session_id, stage.spec.turn_id)
    stage.fail(code, message, say=say)


def _dispatch_tools(stage: Stage, step: int, calls: list[ToolCallRequest]) -> None:
    """Run the calls in parallel on the ``tools`` queue; the chord's callback is the next step."""
    from voxqueue.tracing import inject
    from workers.app import app

    spec = stage.spec
    now = time.time()
    jobs = [ToolCallJob(turn_id=spec.turn_id, step=step, call_id=c.id, name=c.name,
                        arguments=c.arguments, session_id=spec.session_id, device=spec.device,
                        enqueued_at=now) for c in calls]
    headers = inject()  # the trace context: tools and the resume are children of this step
    header = [app.signature(TOOLS_RUN, args=[j.model_dump(mode="json")],
                            options={"argsrepr": j.describe(), "headers": headers})
              for j in jobs]
    resume = AgentStep(turn_id=spec.turn_id, step=step + 1, enqueued_at=now)
    callback = app.signature(AGENT_RESUME, args=[resume.model_dump(mode="json")],
                             options={"argsrepr": f"[tool results] {resume.describe()}",
                                      "headers": headers})
    chord(header)(callback)


def _final_reply(stage: Stage, step: int, text: str, history: History) -> None:
    """Record the reply, free the session and speak the reply sentence by sentence."""
    rt, spec = stage.rt, stage.spec
    if rt.store.once(spec.turn_id, "final"):
        history.append(msg.assistant(text))
        stage.emit("reply", {"text": text, "step": step})
    rt.store.release_session(spec.session_id, spec.turn_id)
    if not spec.speak:
        stage.finish("ok")
        return
    progress.close(rt, spec)  # the sentences were sent while the answer streamed
