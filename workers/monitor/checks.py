"""One check per monitor kind: measure, then decide with the monitor's condition.

A check returns ``alerting`` when the condition holds, ``ok`` when it does not, and ``error``
when it could not measure (a JSON API unreachable, a missing path). An HTTP target that does
not answer is ``alerting``: being down is what an HTTP monitor watches for.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from workers.monitor.conditions import ConditionError, json_path
from workers.monitor.monitors import Monitor, State, from_settings
from workers.tool_registry import probes
from workers.tool_registry.net import BlockedURLError, ResponseTooLarge, host_of, safe_get

if TYPE_CHECKING:
    from workers.runtime.resources import Runtime

#: Error codes that mean a provider failed the turn, per stage.
PROVIDER_CODES: dict[str, set[str]] = {
    "stt": {"stt-failed"},
    "llm": {"llm-failed"},
    "tts": {"tts-failed"},
}
HTTP_MAX_BYTES = 1_000_000
_ERROR_SCAN = 20  # stream entries read per batch when looking for a turn's error event
_ERROR_SCAN_MAX = 200


@dataclass(frozen=True)
class CheckResult:
    state: State
    value: Any
    detail: str


def _decide(
    monitor: Monitor, lookup: Callable[[str], Any], detail: str, text: str = ""
) -> CheckResult:
    try:
        alerting = monitor.parsed_condition.holds(lookup, text)
    except ConditionError as exc:
        return CheckResult("error", None, f"{detail}; {exc}")
    if alerting:
        return CheckResult("alerting", lookup(""), f"{detail} (alert when {monitor.condition})")
    return CheckResult("ok", lookup(""), detail)


def _allow(monitor: Monitor, rt: Runtime) -> list[str]:
    """Monitors of this process's settings may reach private hosts; the agent's (and any
    other stored one, whatever its ``origin`` says) follow the allow-list."""
    return [host_of(monitor.target)] if from_settings(monitor, rt.settings) else []


def check_http(monitor: Monitor, rt: Runtime) -> CheckResult:
    """Status, latency (ms) and body text of a GET."""
    started = time.perf_counter()
    try:
        answer = safe_get(
            monitor.target,
            rt.settings,
            allow=_allow(monitor, rt),
            max_bytes=HTTP_MAX_BYTES,
            timeout_s=min(rt.settings.tools.fetch_timeout_s, max(1.0, monitor.every)),
        )
    except BlockedURLError as exc:
        return CheckResult("error", None, str(exc))
    except (ConnectionError, TimeoutError, OSError, ValueError) as exc:
        return CheckResult("alerting", None, f"{monitor.target} did not answer: {exc}")
    latency = round((time.perf_counter() - started) * 1000, 1)
    values = {"": answer.status, "status": answer.status, "latency": latency}
    return _decide(
        monitor,
        values.__getitem__,
        f"{monitor.target} answered {answer.status} in {latency:g} ms",
        answer.text(),
    )


def check_json(monitor: Monitor, rt: Runtime) -> CheckResult:
    """A value at a JSON path compared with a threshold."""
    try:
        answer = safe_get(
            monitor.target,
            rt.settings,
            allow=_allow(monitor, rt),
            headers={"Accept": "application/json"},
            timeout_s=min(rt.settings.tools.fetch_timeout_s, max(1.0, monitor.every)),
        )
        if not answer.ok:
            return CheckResult("error", None, f"{monitor.target} answered {answer.status}")
        data = answer.json()
    except (ConnectionError, TimeoutError, OSError, ValueError, ResponseTooLarge) as exc:
        return CheckResult("error", None, f"could not read {monitor.target}: {exc}")
    fields = sorted(monitor.parsed_condition.fields - {""})
    try:
        seen = {path: json_path(data, path) for path in fields}
    except ConditionError as exc:
        return CheckResult("error", None, f"{monitor.target}: {exc}")
    main = seen[fields[0]] if fields else data
    shown = ", ".join(f"{path} is {json.dumps(v)}" for path, v in seen.items())
    return _decide(monitor, lambda f: main if f == "" else seen[f], shown or "value read")


def check_queue_depth(monitor: Monitor, rt: Runtime) -> CheckResult:
    """Jobs waiting: in the named queue, else in all queues together."""
    depths = probes.queue_depths(rt)
    depth = depths[monitor.target] if monitor.target else sum(depths.values())
    where = f"the {monitor.target} queue" if monitor.target else "all queues"
    return _decide(monitor, lambda f: depth, f"{depth} jobs waiting in {where}")


#: How long the second ask for workers waits for late replies.
SLOW_REPLY_S = 3.0


def check_workers_missing(monitor: Monitor, rt: Runtime) -> CheckResult:
    """The fewest live workers serving any of the watched queues."""
    counts = probes.live_workers(rt)
    if counts is not None and any(counts.get(q, 0) == 0 for q in monitor.queues):
        # A busy or just-started worker may answer late: ask once more, longer, before
        # saying a queue has none.
        again = probes.live_workers(rt, timeout_s=SLOW_REPLY_S)
        if again is not None:
            counts = {q: max(n, again.get(q, 0)) for q, n in counts.items()}
    if counts is None:
        return CheckResult("error", None, "the workers could not be asked")
    watched = {q: counts.get(q, 0) for q in monitor.queues}
    fewest = min(watched.values())
    empty = [q for q, n in watched.items() if n == 0]
    detail = (
        f"no worker serves {', '.join(empty)}"
        if empty
        else "workers: " + ", ".join(f"{q} {n}" for q, n in watched.items())
    )
    return _decide(monitor, lambda f: fewest, detail)


def provider_error_rate(rt: Runtime, stage: str, window_s: float, *,
                        clock: Callable[[], float] = time.time) -> tuple[float, int, int]:
    """(rate, failed, ended): turns ended within the window up to ``clock()`` (a wall clock),
    and how many of them a provider (of ``stage``; all when empty) failed, read from the
    ended-turns stream."""
    codes = PROVIDER_CODES.get(stage) or set().union(*PROVIDER_CODES.values())
    since_ms = int((clock() - window_s) * 1000)
    entries: Any = rt.redis.xrange(rt.keys.ended_turns(), min=f"{since_ms}-0", max="+")
    ended = failed = 0
    for _id, fields in entries:
        ended += 1
        if fields.get(b"status") == b"error" and _error_code(rt, fields.get(b"turn_id")) in codes:
            failed += 1
    return (failed / ended if ended else 0.0), failed, ended


def _error_code(rt: Runtime, raw_turn_id: bytes | None) -> str | None:
    """The code of a turn's ``error`` event (read in small batches: streams carry audio)."""
    if not raw_turn_id:
        return None
    key = rt.keys.events(raw_turn_id.decode())
    start, read = "-", 0
    while read < _ERROR_SCAN_MAX:
        batch: Any = rt.redis.xrange(key, min=start, max="+", count=_ERROR_SCAN)
        for entry_id, fields in batch:
            event = json.loads(fields.get(b"e", b"{}"))
            if event.get("type") == "error":
                return str(event.get("data", {}).get("code"))
            start = "(" + entry_id.decode()
        if len(batch) < _ERROR_SCAN:
            return None
        read += len(batch)
    return None


def check_provider_errors(monitor: Monitor, rt: Runtime) -> CheckResult:
    """The share of recently ended turns that a provider failed."""
    window = rt.settings.monitors.error_window_s
    rate, failed, ended = provider_error_rate(rt, monitor.target, window)
    who = f"the {monitor.target} provider" if monitor.target else "providers"
    detail = f"{who} failed {failed} of {ended} turns in the last {window / 60:g} min ({rate:.0%})"
    return _decide(monitor, lambda f: round(rate, 4), detail)


CHECKS: dict[str, Callable[[Monitor, Runtime], CheckResult]] = {
    "http": check_http,
    "json": check_json,
    "queue_depth": check_queue_depth,
    "workers_missing": check_workers_missing,
    "provider_errors": check_provider_errors,
}


def run_check(monitor: Monitor, rt: Runtime) -> CheckResult:
    """Measure the monitor's target once (never raises for the target's own failures)."""
    return CHECKS[monitor.kind](monitor, rt)
