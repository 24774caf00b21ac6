"""The tool task: one call of one LLM answer; the calls of an answer run in parallel and join
by themselves (``workers/runtime/join.py``)."""

from __future__ import annotations

import time
from typing import Any

from celery import Task

from voxqueue.celery_config import TIME_LIMITS, TOOLS_RUN
from voxqueue.contracts import ToolCallJob, ToolOutcome
from voxqueue.observability.otel import span
from voxqueue.once import Fenced
from workers.app import app
from workers.runtime import join
from workers.runtime.stage import Stage, begin, runtime_of
from workers.runtime.trust import call_problem, effect_problem
from workers.tool_registry.context import ToolCall, use_runtime
from workers.tools.executor import run_tool_call


@app.task(name=TOOLS_RUN, bind=True, ignore_result=True, time_limit=TIME_LIMITS["tools"],
          soft_time_limit=TIME_LIMITS["tools"] - 10)
def run(self: Task, job: dict[str, Any]) -> None:
    """Run one tool call, store its outcome (errors included, as data) and count it in the
    step's join; the call that completes the join sends the next step."""
    tjob = ToolCallJob.model_validate(job)
    rt = runtime_of(self)
    key = rt.keys.tool_outcome(tjob.turn_id, tjob.call_id)
    # One round trip: an outcome stored by an earlier delivery, and the answer that asked.
    pipe = rt.redis.pipeline(transaction=False)
    pipe.exists(key)
    pipe.hget(rt.keys.turn(tjob.turn_id), f"answer:{tjob.step}")
    cached, answer = pipe.execute()
    if cached:  # a redelivered call: never run a tool twice; finish the join it may have left
        join.send_if_complete(rt, tjob)
        return
    stage = begin(self, tjob, "tools")
    if stage is None:  # ended, done, or another copy of this call holds it
        return
    try:
        counted = _run(stage, tjob, answer)
    except Fenced:  # a newer delivery took over: it stores the outcome and joins
        return
    except Exception as exc:  # a bug in this module: still answer the model, as data
        stage.log.exception("tool task failed", tool=tjob.name)
        counted = _record(stage, tjob, _failed(
            tjob, "tools-failed",
            f"Error: the tools service failed: {exc.__class__.__name__}: {exc}"))
    stage.crash_point("tools.after-record")
    join.send_if_complete(rt, tjob, counted)
    stage.crash_point("tools.after-join")
    stage.complete()


def _run(stage: Stage, tjob: ToolCallJob, answer: bytes | None) -> Any:
    """Run the call and record its outcome; returns the join's count (None: not counted by
    this attempt)."""
    rt = stage.rt
    if (problem := call_problem(tjob, answer)) is not None:
        stage.log.error("tool call refused", tool=tjob.name, problem=problem)
        return _record(stage, tjob, _failed(tjob, "refused",
                                            f"Error: this call was refused: {problem}."))
    stage.emit("tool-start", {"call_id": tjob.call_id, "name": tjob.name, "step": tjob.step,
                              "queue_ms": stage.queue_ms(tjob)})
    call = ToolCall(turn_id=tjob.turn_id, session_id=stage.spec.session_id,
                    device=stage.spec.device, call_id=tjob.call_id, name=tjob.name)
    s = rt.settings
    try:
        tool = rt.tools.get(tjob.name)
    except Exception:
        tool = None
    if tool is not None and (problem := effect_problem(stage.spec, tool.name,
                                                       tool.side_effects)) is not None:
        stage.log.warning("tool call refused", tool=tjob.name, problem=problem)
        return _record(stage, tjob, _failed(tjob, "not-allowed", f"Error: {problem}. Tell the "
                                            "person it cannot be done from here."))
    if tool is not None and tool.side_effects and not tool.idempotent and not rt.store.claim(
            tjob.turn_id, f"tool-claim:{tjob.call_id}", stage.fence):
        # Delivered again after a crash mid-call: the action may have happened; never repeat it
        # (an idempotent tool is run again: its key makes the effect happen once).
        result = ToolOutcome(
            call_id=tjob.call_id, name=tjob.name, arguments=tjob.arguments, ok=False,
            content=f"Error: {tjob.name} was interrupted and may or may not have run; it was "
                    "not repeated. Check its state before trying again.",
            error_code="not-repeated", started_at=time.time(), ms=0.0)
        return _record(stage, tjob, result)
    stage.crash_point("tools.after-effect-claim")
    try:
        with span(f"tool {tjob.name}", tool=tjob.name), use_runtime(rt):
            result = run_tool_call(rt.tools, call, tjob.arguments,
                                   timeout_s=min(s.tools.timeout_s, max(0.5, stage.remaining())),
                                   max_chars=s.tools.result_max_chars)
    except Exception as exc:  # e.g. the tool registry failed to load: still answer the model
        stage.log.exception("tool call failed", tool=tjob.name)
        result = ToolOutcome(call_id=tjob.call_id, name=tjob.name, arguments=tjob.arguments,
                             ok=False, content=f"Error: the tools service failed: "
                             f"{exc.__class__.__name__}: {exc}", error_code="tools-failed",
                             started_at=time.time(), ms=0.0)
    stage.crash_point("tools.after-run")
    return _record(stage, tjob, result)


def _record(stage: Stage, tjob: ToolCallJob, result: ToolOutcome) -> Any:
    """Keep the outcome, report it and count it in the join, together and once; returns the
    join's count (None when an earlier attempt recorded it, or the turn ended)."""
    once = stage.once_with_event(f"tool-end:{tjob.call_id}", "tool-end", {
        "call_id": result.call_id, "name": result.name, "arguments": result.arguments,
        "ok": result.ok, "step": tjob.step, "ms": result.ms, "started_at": result.started_at,
        ("result" if result.ok else "error"): result.content[:2000],
        "error_code": result.error_code})
    stored = join.record_in(once, stage.rt, tjob, result).run()
    return stored[-1] if stored else None


def _failed(job: ToolCallJob, code: str, content: str) -> ToolOutcome:
    return ToolOutcome(call_id=job.call_id, name=job.name, arguments=job.arguments, ok=False,
                       content=content, error_code=code, started_at=time.time(), ms=0.0)
