"""The tool task: one call of one LLM answer; the calls of an answer run as a chord."""

from __future__ import annotations

import time
from typing import Any

from celery import Task

from voxqueue.celery_config import TIME_LIMITS, TOOLS_RUN
from voxqueue.contracts import ToolCallJob, ToolOutcome
from voxqueue.effects import Fenced
from voxqueue.otel import span
from workers.app import app
from workers.runtime.stage import Stage, begin, runtime_of
from workers.runtime.trust import call_problem
from workers.toolkit.context import ToolCall, use_runtime
from workers.tools.executor import run_tool_call


@app.task(name=TOOLS_RUN, bind=True, ignore_result=False, time_limit=TIME_LIMITS["tools"],
          soft_time_limit=TIME_LIMITS["tools"] - 10)
def run(self: Task, job: dict[str, Any]) -> dict[str, Any]:
    """Run one tool call and return its outcome (errors included, as data). Never raises: a
    chord member that raised would fail the whole answer."""
    tjob = ToolCallJob.model_validate(job)
    rt = runtime_of(self)
    key = rt.keys.tool_outcome(tjob.turn_id, tjob.call_id)
    # One round trip: an outcome stored by an earlier delivery, and the answer that asked.
    pipe = rt.redis.pipeline(transaction=False)
    pipe.get(key)
    pipe.hget(rt.keys.turn(tjob.turn_id), f"answer:{tjob.step}")
    cached, answer = pipe.execute()
    if cached is not None:  # a redelivered call: never run a tool twice
        return ToolOutcome.model_validate_json(cached).model_dump(mode="json")
    stage = begin(self, tjob, "tools")
    if stage is None:
        return _failed(tjob, "turn-ended", "Error: the turn ended before this tool ran.")
    try:
        result = _run(stage, tjob, answer)
    except Fenced:  # a newer delivery took over: report what it stored, if it did
        stored = rt.redis.get(key)
        if stored is not None:
            return ToolOutcome.model_validate_json(stored).model_dump(mode="json")
        return _failed(tjob, "superseded", "Error: this call was interrupted; try it again.")
    except Exception as exc:  # a bug in this module: still answer the chord, as data
        stage.log.exception("tool task failed", tool=tjob.name)
        result = _record(stage, tjob, key, ToolOutcome(
            call_id=tjob.call_id, name=tjob.name, arguments=tjob.arguments, ok=False,
            content=f"Error: the tools service failed: {exc.__class__.__name__}: {exc}",
            error_code="tools-failed", started_at=time.time(), ms=0.0))
    stage.complete()
    return result


def _run(stage: Stage, tjob: ToolCallJob, answer: bytes | None) -> dict[str, Any]:
    rt = stage.rt
    key = rt.keys.tool_outcome(tjob.turn_id, tjob.call_id)
    if (problem := call_problem(tjob, answer)) is not None:
        stage.log.error("tool call refused", tool=tjob.name, problem=problem)
        return _failed(tjob, "refused", f"Error: this call was refused: {problem}.")
    stage.emit("tool-start", {"call_id": tjob.call_id, "name": tjob.name, "step": tjob.step,
                              "queue_ms": stage.queue_ms(tjob)})
    call = ToolCall(turn_id=tjob.turn_id, session_id=stage.spec.session_id,
                    device=stage.spec.device, call_id=tjob.call_id, name=tjob.name)
    s = rt.settings
    try:
        tool = rt.tools.get(tjob.name)
    except Exception:
        tool = None
    if tool is not None and tool.side_effects and not stage.rt.store.claim(
            tjob.turn_id, f"tool-claim:{tjob.call_id}", stage.fence):
        # Delivered again after a crash mid-call: the action may have happened; never repeat it.
        result = ToolOutcome(
            call_id=tjob.call_id, name=tjob.name, arguments=tjob.arguments, ok=False,
            content=f"Error: {tjob.name} was interrupted and may or may not have run; it was "
                    "not repeated. Check its state before trying again.",
            error_code="not-repeated", started_at=time.time(), ms=0.0)
        return _record(stage, tjob, key, result)
    try:
        with span(f"tool {tjob.name}", tool=tjob.name), use_runtime(rt):
            result = run_tool_call(rt.tools, call, tjob.arguments,
                                   timeout_s=min(s.tool_timeout_s, max(0.5, stage.remaining())),
                                   max_chars=s.tool_result_max_chars)
    except Exception as exc:  # e.g. the tool registry failed to load: still answer the chord
        stage.log.exception("tool call failed", tool=tjob.name)
        result = ToolOutcome(call_id=tjob.call_id, name=tjob.name, arguments=tjob.arguments,
                             ok=False, content=f"Error: the tools service failed: "
                             f"{exc.__class__.__name__}: {exc}", error_code="tools-failed",
                             started_at=time.time(), ms=0.0)
    stage.crash_point("tools.after-run")
    return _record(stage, tjob, key, result)


def _record(stage: Stage, tjob: ToolCallJob, key: str, result: ToolOutcome) -> dict[str, Any]:
    """Keep the outcome and report it, together and once; a redelivered call returns it."""
    stored = stage.once_with_event(f"tool-end:{tjob.call_id}", "tool-end", {
        "call_id": result.call_id, "name": result.name, "arguments": result.arguments,
        "ok": result.ok, "step": tjob.step, "ms": result.ms, "started_at": result.started_at,
        ("result" if result.ok else "error"): result.content[:2000],
        "error_code": result.error_code},
    ).call("SET", key, result.model_dump_json(), "EX", stage.rt.settings.turn_ttl_s).run()
    if stored is None:  # recorded by an earlier attempt: that outcome is the one
        kept = stage.rt.redis.get(key)
        if kept is not None:
            result = ToolOutcome.model_validate_json(kept)
    stage.crash_point("tools.after-record")
    return result.model_dump(mode="json")


def _failed(job: ToolCallJob, code: str, content: str) -> dict[str, Any]:
    return ToolOutcome(call_id=job.call_id, name=job.name, arguments=job.arguments, ok=False,
                       content=content, error_code=code, started_at=time.time(),
                       ms=0.0).model_dump(mode="json")
