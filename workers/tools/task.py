"""The tool task: one call of one LLM answer; the calls of an answer run as a chord."""

from __future__ import annotations

import time
from typing import Any

from celery import Task

from voxqueue.celery_config import TIME_LIMITS, TOOLS_RUN
from voxqueue.contracts import ToolCallJob, ToolOutcome
from voxqueue.tracing import span
from workers.app import app
from workers.runtime.stage import Stage, begin
from workers.tools.context import ToolCall
from workers.tools.executor import run_tool_call


@app.task(name=TOOLS_RUN, bind=True, ignore_result=False, time_limit=TIME_LIMITS["tools"],
          soft_time_limit=TIME_LIMITS["tools"] - 10)
def run(self: Task, job: dict[str, Any]) -> dict[str, Any]:
    """Run one tool call and return its outcome (errors included, as data)."""
    tjob = ToolCallJob.model_validate(job)
    rt = app.runtime
    key = rt.keys.tool_outcome(tjob.turn_id, tjob.call_id)
    cached = rt.redis.get(key)
    if cached is not None:  # a redelivered call: never run a tool twice
        return ToolOutcome.model_validate_json(cached).model_dump(mode="json")
    stage = begin(self, tjob, "tools")
    if stage is None:
        return _skipped(tjob).model_dump(mode="json")
    stage.emit("tool-start", {"call_id": tjob.call_id, "name": tjob.name, "step": tjob.step,
                              "queue_ms": stage.queue_ms(tjob)})
    call = ToolCall(turn_id=tjob.turn_id, session_id=stage.spec.session_id,
                    device=stage.spec.device, call_id=tjob.call_id, name=tjob.name)
    s = rt.settings
    try:
        tool = rt.tools.get(tjob.name)
    except Exception:
        tool = None
    if tool is not None and tool.side_effects and not rt.store.once(
            tjob.turn_id, f"tool-claim:{tjob.call_id}"):
        # Delivered again after a crash mid-call: the action may have happened; never repeat it.
        result = ToolOutcome(
            call_id=tjob.call_id, name=tjob.name, arguments=tjob.arguments, ok=False,
            content=f"Error: {tjob.name} was interrupted and may or may not have run; it was "
                    "not repeated. Check its state before trying again.",
            error_code="not-repeated", started_at=time.time(), ms=0.0)
        return _record(stage, tjob, key, result)
    try:
        with span(f"tool {tjob.name}", tool=tjob.name):
            result = run_tool_call(rt.tools, call, tjob.arguments,
                                   timeout_s=min(s.tool_timeout_s, max(0.5, stage.remaining())),
                                   max_chars=s.tool_result_max_chars)
    except Exception as exc:  # e.g. the tool registry failed to load: still answer the chord
        stage.log.exception("tool call failed", tool=tjob.name)
        result = ToolOutcome(call_id=tjob.call_id, name=tjob.name, arguments=tjob.arguments,
                             ok=False, content=f"Error: the tools service failed: "
                             f"{exc.__class__.__name__}: {exc}", error_code="tools-failed",
                             started_at=time.time(), ms=0.0)
    return _record(stage, tjob, key, result)


def _record(stage: Stage, tjob: ToolCallJob, key: str, result: ToolOutcome) -> dict[str, Any]:
    """Keep the outcome (a redelivered call returns it) and report it."""
    stage.rt.redis.set(key, result.model_dump_json(), ex=stage.rt.settings.turn_ttl_s)
    stage.emit("tool-end", {
        "call_id": result.call_id, "name": result.name, "arguments": result.arguments,
        "ok": result.ok, "step": tjob.step, "ms": result.ms, "started_at": result.started_at,
        ("result" if result.ok else "error"): result.content[:2000],
        "error_code": result.error_code})
    return result.model_dump(mode="json")


def _skipped(job: ToolCallJob) -> ToolOutcome:
    return ToolOutcome(call_id=job.call_id, name=job.name, arguments=job.arguments, ok=False,
                       content="Error: the turn ended before this tool ran.",
                       error_code="turn-ended", started_at=time.time(), ms=0.0)
