"""One step of the agent loop: call the model with the whole history, then either fan the tool
calls out (the last of them to store its outcome sends the next step) or speak the final reply.

Every write of a step happens once, atomically (``Stage.once``), and every send is idempotent
(the job's own task id), so a step delivered again after its worker died finishes what the
first attempt began and repeats nothing: not the model call once its answer is stored, not a
history message, not a sentence, not a tool.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from typing import Any

from voxqueue.budgets import SPEAK_CHARS, charged_device
from voxqueue.celery_config import AGENT_RESUME, TOOLS_RUN
from voxqueue.contracts import AgentStep, ErrorCode, ToolCallJob
from voxqueue.observability.otel import span
from voxqueue.settings import MissingKeyError
from workers.agent import messages as msg
from workers.agent.context import measure_context
from workers.agent.context.accounting import record_step_in
from workers.agent.history import History
from workers.agent.opening import Opened, history_of
from workers.agent.providers.base import Answer, StreamStopped, ToolCallRequest
from workers.agent.reply_sentences import Speaker
from workers.runtime import completion, ending, handoff
from workers.runtime.retry import ProviderError
from workers.runtime.stage import Stage
from workers.runtime.trust import effect_problem
from workers.tool_registry.policy import cap_calls


def run_step(stage: Stage, job: AgentStep, opened: Opened, reply_chars: int = 0) -> None:
    """Call the model once and act on its answer. ``opened``: what the step read and
    announced (``open_turn``, ``open_step``); ``reply_chars``: what the turn's earlier steps
    said (of ``VOXQUEUE_REPLY_MAX_CHARS``)."""
    rt, step = stage.rt, job.step
    history = history_of(stage)
    answer = _answer(stage, step, history, opened, reply_chars)
    if answer is None or stage.should_stop():
        return
    if answer.tool_calls and step >= rt.settings.agent.max_steps:
        text = (f"Sorry, I couldn't finish that: I stopped after {rt.settings.agent.max_steps} "
                "steps without an answer.")
        history.extend_in(stage.once(f"history-{step}"), [msg.assistant(text)]).run()
        _give_up(stage, ErrorCode.LLM_STEP_CAP,
                 f"the agent loop reached its cap of {rt.settings.agent.max_steps} steps", say=text)
        return
    if answer.tool_calls:
        history.extend_in(stage.once(f"history-{step}"), [msg.assistant_tool_calls(
            [c.as_dict() for c in answer.tool_calls], answer.text or None,
            answer.reasoning)]).run()
        stage.crash_point("agent.after-history")
        _dispatch_tools(stage, step, answer.tool_calls)
        return
    if not answer.text:
        _give_up(stage, ErrorCode.LLM_FAILED, "the model returned an empty answer")
        return
    _final_reply(stage, step, answer.text, history)


def _answer(stage: Stage, step: int, history: History, opened: Opened,
            reply_chars: int) -> Answer | None:
    """The model's answer for this step: stored once, so a redelivered step reuses it and
    speaks the sentences it had cut, not a new cut of the whole text. A step that died before
    storing it asks the model again, and keeps what it had spoken as its answer's start
    (``Speaker.resume``): the reply recorded is the reply heard, however the model words it."""
    rt, spec = stage.rt, stage.spec
    turn_key = rt.keys.turn(spec.turn_id)
    field = f"answer:{step}"
    if opened.saved_answer is not None:
        return _replay(stage, step, json.loads(opened.saved_answer))
    speaker = Speaker(stage, step, reply_chars)
    try:
        speaker.resume()
        model = rt.chat_model
        started = time.perf_counter()
        prepared = measure_context(stage, history, opened.messages)
        messages = prepared.messages
        with span("llm.complete", step=step, provider=model.name):
            answer = model.complete(messages, _offered(stage), deadline=spec.deadline,
                                    on_text=speaker.on_text)
        if not (answer.tool_calls and step >= rt.settings.agent.max_steps):
            speaker.cut_rest(answer.text)  # sent once the answer is stored (below)
        else:
            speaker.flush()
        text = speaker.said(answer.text)
        record = {"text": text, "calls": [c.as_dict() for c in answer.tool_calls],
                  "sentences": speaker.sentences, "reply_chars": reply_chars + speaker.chars,
                  **({"reasoning": answer.reasoning} if answer.reasoning else {})}
        stage.crash_point("agent.before-answer")
        answered = stage.once_with_event(field, "llm-end", {
            "step": step, "ms": round((time.perf_counter() - started) * 1000, 2),
            "ttfb_ms": answer.ttfb_ms, "text": text, "usage": answer.usage,
            "finish_reason": answer.finish_reason, "spoken_before": speaker.spoken_before,
            "tool_calls": [c.as_dict() for c in answer.tool_calls],
            **({"cut_from": len(answer.text)} if speaker.capped else {})},
        ).call("HSET", turn_key, field, json.dumps(record))
        stored = record_step_in(answered, rt.keys, spec, step, tokens=prepared.tokens,
                                limit=prepared.limit, messages=len(messages),
                                ttl_s=rt.settings.turns.session_ttl_s).run()
        if stored is None:  # another delivery of this step stored its answer first: use that
            return _replay(stage, step, json.loads(rt.redis.hget(turn_key, field) or b"{}"))
        stage.crash_point("agent.after-answer")
        speaker.flush()  # the sentences not sent yet: a step run again now replays them
    except StreamStopped:
        return None
    except MissingKeyError as exc:
        _give_up(stage, ErrorCode.MISSING_KEY, str(exc))
        return None
    except ProviderError as exc:
        _give_up(stage, ErrorCode.LLM_FAILED, str(exc))
        return None
    finally:
        speaker.close()
    return replace(answer, text=text)


def _offered(stage: Stage) -> list[dict[str, Any]]:
    """The schemas of the tools this turn may run (its client may narrow the side effects)."""
    return [t.schema for t in stage.rt.tools
            if effect_problem(stage.spec, t.name, t.side_effects) is None]


def _replay(stage: Stage, step: int, record: dict[str, Any]) -> Answer:
    """A stored answer; its sentences are sent again only where no earlier attempt sent them."""
    Speaker(stage, step).resend(record.get("sentences", []))
    return Answer(text=record.get("text", ""),
                  tool_calls=[ToolCallRequest(**c) for c in record.get("calls", [])],
                  reasoning=record.get("reasoning", []))


def _give_up(stage: Stage, code: ErrorCode, message: str, say: str | None = None) -> None:
    """End the turn with an error (spoken); the session is free for its next turn at once."""
    stage.rt.store.release_session(stage.spec.session_id, stage.spec.turn_id, stage.fence)
    ending.fail(stage, code, message, say=say)


def _dispatch_tools(stage: Stage, step: int, calls: list[ToolCallRequest]) -> None:
    """Run the calls in parallel on the ``tools`` queue; the one that completes their join
    sends the next step (``workers/tools/join.py``).

    Every id is the turn's own (calls, next step), so calls sent again by a step that died
    after sending them are the same jobs: each runs once, and the next step is sent once.
    """
    spec = stage.spec
    now = time.time()
    run, _refused = cap_calls(calls, stage.rt.settings.agent.max_tool_calls_per_answer)
    jobs = [ToolCallJob(turn_id=spec.turn_id, step=step, call_id=c.id, name=c.name,
                        arguments=c.arguments, calls=len(run), session_id=spec.session_id,
                        device=spec.device, enqueued_at=now)
            for c in run]  # the rest are answered by resume
    if not jobs:  # every call refused: the next step answers them all
        handoff.send_once(stage, AgentStep(turn_id=spec.turn_id, step=step + 1,
                                           enqueued_at=now), AGENT_RESUME)
        return
    handoff.fan_out(stage, TOOLS_RUN, jobs, f"sent:tools-{step}")


def _final_reply(stage: Stage, step: int, text: str, history: History) -> None:
    """Record the reply, free the session and speak the reply sentence by sentence (its pieces
    went with its answer, counted on its device's characters: they are held for it no longer,
    before the turn's end)."""
    rt, spec = stage.rt, stage.spec
    once = stage.once_with_event("final", "reply", {"text": text, "step": step})
    if (device := charged_device(spec)) is not None:
        once.call("ZREM", rt.keys.device_held(device, SPEAK_CHARS), spec.turn_id)
    history.extend_in(once, [msg.assistant(text)]).run()
    stage.crash_point("agent.after-reply")
    rt.store.release_session(spec.session_id, spec.turn_id, stage.fence)
    if not spec.speak:
        stage.finish("ok")
        return
    completion.close(rt, spec)  # the sentences were sent with the answer (``_answer``)
    stage.crash_point("agent.after-close")

