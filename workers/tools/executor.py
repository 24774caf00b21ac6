"""Running one tool call: every failure becomes a message the model can act on, never a raise.

It also applies the turn's guard (:mod:`workers.tools.guard`): a tool that reads untrusted
content taints the turn before its result is returned, and a side effect in a tainted turn
waits for the person's spoken yes to the system's own question. Only such tools touch Redis
here.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import inspect
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from pydantic import ValidationError

from voxqueue.contracts import ToolOutcome
from workers.tool_registry.context import ToolCall, runtime, set_current_call
from workers.tool_registry.registry import Tool, ToolRegistry, ToolReply
from workers.tools.guard import TurnGuard

_pool_lock = threading.Lock()
_pools: dict[int, ThreadPoolExecutor] = {}


def _pool() -> ThreadPoolExecutor:
    """A per-process pool for tool bodies, so a timed-out tool cannot hold the task."""
    import os

    with _pool_lock:
        pid = os.getpid()
        if pid not in _pools:
            _pools[pid] = ThreadPoolExecutor(max_workers=32, thread_name_prefix="tool")
        return _pools[pid]


def run_tool_call(registry: ToolRegistry, call: ToolCall, raw_arguments: str, *,
                  timeout_s: float, max_chars: int) -> ToolOutcome:
    """Validate the arguments, run the tool within its timeout, and describe what happened."""
    started_at = time.time()
    t0 = time.perf_counter()

    def outcome(ok: bool, content: str, code: str | None = None,
                arguments: dict[str, Any] | str = raw_arguments,
                say: str | None = None) -> ToolOutcome:
        if len(content) > max_chars:
            content = content[:max_chars] + f"\n[truncated: the result had {len(content)} " \
                      f"characters, only the first {max_chars} are shown]"
        return ToolOutcome(call_id=call.call_id, name=call.name, arguments=arguments, ok=ok,
                           content=content, error_code=code, started_at=started_at,
                           say=say,
                           ms=round((time.perf_counter() - t0) * 1000, 2))

    tool = registry.get(call.name)
    if tool is None:
        return outcome(False, f"Error: there is no tool named {call.name!r}. "
                       f"Available tools: {', '.join(registry.names)}.", "unknown-tool")
    try:
        parsed = json.loads(raw_arguments) if raw_arguments.strip() else {}
    except json.JSONDecodeError as exc:
        return outcome(False, f"Error: the arguments for {call.name} are not valid JSON "
                       f"({exc.msg} at position {exc.pos}). Call it again with a JSON object.",
                       "invalid-json")
    if not isinstance(parsed, dict):
        return outcome(False, f"Error: the arguments for {call.name} must be a JSON object, "
                       f"not {type(parsed).__name__}.", "invalid-json")
    try:
        args = tool.args_model.model_validate(parsed)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'arguments'}: {err['msg']}"
            for err in exc.errors(include_url=False))
        return outcome(False, f"Error: invalid arguments for {call.name}: {problems}. "
                       "Fix them and call the tool again.", "invalid-arguments", parsed)
    limit = tool.timeout_s or timeout_s
    kwargs = {name: getattr(args, name) for name in type(args).model_fields}
    guard: TurnGuard | None = None
    if tool.side_effects or tool.reads_untrusted:
        try:
            guard = _guard()
            facts = guard.facts(call)
            call = dataclasses.replace(call, utterance=facts.text)
            refusal = guard.admit(call, facts, tool, args.model_dump(
                mode="json", by_alias=True)) if tool.side_effects else None
        except Exception as exc:  # fail closed: without the guard, neither runs
            return outcome(False, _guard_failed(call.name, exc), "guard-unavailable", parsed)
        if refusal is not None:
            return outcome(False, refusal.message, refusal.code, parsed)
    ctx = contextvars.copy_context()
    ctx.run(set_current_call, call)
    future = _pool().submit(ctx.run, _invoke, tool.fn, kwargs)
    try:
        value = future.result(timeout=limit)
    except FutureTimeout:
        future.cancel()
        if tool.side_effects:  # it may still complete: inviting a retry could do it twice
            return outcome(False, f"Error: {call.name} did not finish within {limit:g} s; it "
                           "may still complete. Do not call it again for this request: tell "
                           "the person it may or may not have been done.", "timeout", parsed)
        return outcome(False, f"Error: {call.name} did not finish within {limit:g} s and was "
                       "abandoned. Try again later or answer without it.", "timeout", parsed)
    except Exception as exc:  # a tool's own failure is data for the model
        # Its message may quote what it read; a PermissionError is a refusal before reading.
        failed = None if isinstance(exc, PermissionError) else _tainted(guard, tool, call)
        if failed:
            return outcome(False, failed, "guard-unavailable", parsed)
        return outcome(False, f"Error: {call.name} failed: {exc.__class__.__name__}: {exc}",
                       "tool-exception", parsed)
    failed = _tainted(guard, tool, call)
    if failed:
        return outcome(False, failed, "guard-unavailable", parsed)
    if isinstance(value, ToolReply):
        said = " ".join(value.say.split())[:2000] or None
        return outcome(True, _render(value.data), None, parsed, say=said)
    return outcome(True, _render(value), None, parsed)


def _guard() -> TurnGuard:
    rt = runtime()
    return TurnGuard(rt.redis, rt.keys, rt.settings)


def _tainted(guard: TurnGuard | None, tool: Tool, call: ToolCall) -> str | None:
    """Taint the turn before a reader's result reaches the model; the error text when the
    taint could not be written (then the result is withheld)."""
    if guard is None or not tool.reads_untrusted:
        return None
    try:
        guard.taint(call, tool.name)
    except Exception as exc:  # fail closed: the model does not see what it could not taint
        return _guard_failed(call.name, exc)
    return None


def _guard_failed(name: str, exc: Exception) -> str:
    return (f"Error: {name} was not run or its result withheld: the turn's state could not be "
            f"read or written ({exc.__class__.__name__}). Try again shortly.")


def _invoke(fn: Any, kwargs: dict[str, Any]) -> Any:
    if inspect.iscoroutinefunction(fn):
        return asyncio.run(fn(**kwargs))
    return fn(**kwargs)


def _render(value: Any) -> str:
    if isinstance(value, str):
        return value
    if hasattr(value, "model_dump_json"):
        return str(value.model_dump_json())
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)
