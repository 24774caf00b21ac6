"""Monitors the agent creates for the person: watch a site, a value or the system itself, and
tell them when it changes (at their next turn, and at once on their device when urgent).

A monitor made through these tools belongs to its owner (the device that asked, else the
session): only they list, read or delete it; creating them is rate-limited per owner
(``VOXQUEUE_MONITOR_CREATES_PER_HOUR``). The operator's monitors (``VOXQUEUE_MONITORS``, as
this process's settings define them) can be listed and read by all, deleted by none.
"""

from __future__ import annotations

import time

from pydantic import ValidationError

from workers.monitor.monitors import (
    Kind,
    Monitor,
    MonitorStore,
    from_settings,
    name_for,
    scoped_name,
)
from workers.monitor.schedule import RUN_CHECK, schedule_monitor, unschedule_monitor
from workers.tool_registry.context import current_call, owner, runtime
from workers.tool_registry.egress import check_model_url
from workers.tool_registry.net import Allowlist, check_url
from workers.tool_registry.registry import tool

__all__ = ["create_monitor", "delete_monitor", "list_monitors", "monitor_status"]


#: The whole system holds at most this many times ``monitors.max_count`` monitors (each owner
#: holds at most ``monitors.max_count``).
SYSTEM_CAP_FACTOR = 10

def _store() -> MonitorStore:
    rt = runtime()
    return MonitorStore(rt.redis, rt.keys)


#: The rate limit's window, in seconds.
CREATE_WINDOW_S = 3600

# KEYS: the owner's creations (sorted set). ARGV: now, window, limit, member. 1: a slot taken.
_TAKE_SLOT = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', tonumber(ARGV[1]) - tonumber(ARGV[2]))
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[4])
redis.call('EXPIRE', KEYS[1], ARGV[2])
return 1
"""


def _visible(monitor: Monitor, who: str) -> bool:
    """Whether the caller may list and read it: the operator's, or their own."""
    return from_settings(monitor, runtime().settings) or monitor.owner == who


def _take_slot(who: str) -> None:
    """Count one creation against the owner's hourly limit, or refuse it."""
    rt = runtime()
    limit = rt.settings.monitors.creates_per_hour
    now = time.time()
    taken = rt.redis.register_script(_TAKE_SLOT)(
        keys=[rt.keys.monitor_creates(who)], args=[repr(now), CREATE_WINDOW_S, limit, repr(now)])
    if taken != 1:
        raise PermissionError(
            f"at most {limit} monitors can be created per hour from here; try again later")


def _start(monitor: Monitor) -> None:
    """Give the monitor its beat entry and run its first check now (the baseline)."""
    app = runtime().celery
    schedule_monitor(app, monitor)
    app.send_task(RUN_CHECK, args=[monitor.name])


def _ago(ts: float | None) -> str:
    if ts is None:
        return "never"
    seconds = max(0, round(time.time() - ts))
    if seconds < 120:
        return f"{seconds} s ago"
    return f"{seconds // 60} min ago"


@tool(
    side_effects=True,
    examples=(
        "watch the website {target}",
        "monitor the site {target}",
        "tell me when {target} is down",
    ),
)
def create_monitor(
    kind: Kind = "http", target: str = "", condition: str = "", every: float = 60, name: str = ""
) -> str:
    """Start watching something and alert the person when it changes: a web page or API
    (http), a number in a JSON API crossing a threshold such as a price or a temperature
    (json), or the assistant's own health (queue_depth, workers_missing, provider_errors).

    Args:
        kind: http, json, queue_depth, workers_missing or provider_errors.
        target: The URL for http and json (https:// is assumed); a queue name for
            queue_depth and workers_missing (empty: all queues); stt, llm or tts for
            provider_errors (empty: all).
        condition: When to alert. http: "status >= 400" (the default), "latency > 800" (ms),
            "not contains Welcome"; json: a dotted path, an operator and a number, such as
            "bitcoin.usd > 70000"; queue_depth "> 100"; workers_missing "< 1"; provider_errors
            "> 0.5" (a share of turns). Join clauses with "or" / "and".
        every: Seconds between checks.
        name: A short name to refer to the monitor later (default: made from the target).
    """
    rt = runtime()
    store = MonitorStore(rt.redis, rt.keys)
    target = target.strip()
    if kind in ("http", "json") and target and "://" not in target:
        target = "https://" + target
    who = owner()
    # A cap per owner (another's count is none of its business), and one for the whole system.
    if sum(m.owner == who for m in store.all()) >= rt.settings.monitors.max_count:
        raise ValueError(
            f"you have {rt.settings.monitors.max_count} monitors already: delete one first")
    if store.count() >= SYSTEM_CAP_FACTOR * rt.settings.monitors.max_count:
        raise ValueError("the assistant watches too many things already: try again later")
    label = " ".join(name.lower().split()).replace(" ", "-") or name_for(kind, target)
    if not name and store.get(scoped_name(label, who)) is not None:
        label = next(f"{label}-{n}" for n in range(2, 1000)
                     if store.get(scoped_name(f"{label}-{n}", who)) is None)
    chosen = scoped_name(label, who)
    shortest = rt.settings.monitors.min_every_s
    call = current_call()
    try:
        monitor = Monitor(
            name=chosen,
            kind=kind,
            target=target,
            condition=condition,
            every=max(every, shortest),
            session_id=call.session_id if call else None,
            device=call.device if call else None,
        )
    except ValidationError as exc:
        raise ValueError(
            "; ".join(str(e["msg"]).removeprefix("Value error, ") for e in exc.errors())
        ) from None
    if kind in ("http", "json"):  # refuse now what the check would refuse every time
        check_model_url(monitor.target, rt.settings, named_host=False)  # nothing leaves in it
        check_url(monitor.target, Allowlist.parse(rt.settings.tools.url_allowlist))
    if store.get(chosen) is not None:
        raise ValueError(f"you have a monitor named {label!r} already: pick another name")
    _take_slot(who)
    if not store.save(monitor):
        raise ValueError(f"you have a monitor named {label!r} already: pick another name")
    _start(monitor)
    note = f" (the shortest interval allowed is {shortest:g} s)" if every < shortest else ""
    return (
        f"Monitor {monitor.label!r} created: watching {monitor.describe().split(': ', 1)[1]}"
        f"{note}. I'll tell you when that changes."
    )


@tool(examples=("list my monitors", "what are you monitoring", "which monitors are running"))
def list_monitors() -> str:
    """List the monitors: what each watches, how often, and its current state."""
    store = _store()
    who = owner()
    monitors = [m for m in store.all() if _visible(m, who)]
    if not monitors:
        return "There are no monitors."
    lines = []
    for monitor in monitors:
        state = store.state(monitor.name)
        lines.append(f"{monitor.describe()}; now {state.state}")
    return f"{len(monitors)} monitor{'s' if len(monitors) != 1 else ''}: " + "; ".join(lines)


@tool(
    examples=(
        "status of the {name} monitor",
        "how is the {name} monitor",
        "what does the {name} monitor say",
    ),
    reads_untrusted=True,  # the state quotes the watched value
)
def monitor_status(name: str) -> str:
    """Tell how one monitor is doing: its state, since when, and its last check.

    Args:
        name: The monitor's name, as list_monitors gives it.
    """
    store = _store()
    monitor = _find(store, name)
    state = store.state(monitor.name)
    if state.checked_at is None:
        return f"{monitor.describe()}. Not checked yet."
    return (
        f"{monitor.describe()}. State {state.state} since {_ago(state.since)}; last check "
        f"{_ago(state.checked_at)}: {state.detail}. {state.checks} checks, "
        f"{state.alerts} alert{'s' if state.alerts != 1 else ''}."
    )


@tool(
    side_effects=True,
    examples=("stop monitoring {name}", "delete the {name} monitor", "remove monitor {name}"),
)
def delete_monitor(name: str) -> str:
    """Stop a monitor and delete it.

    Args:
        name: The monitor's name, as list_monitors gives it.
    """
    store = _store()
    monitor = _find(store, name)
    if from_settings(monitor, runtime().settings):
        raise PermissionError(
            f"{monitor.label!r} is configured by the operator (VOXQUEUE_MONITORS) and cannot be "
            "deleted by voice")
    if not store.delete(monitor.name):
        raise ValueError(f"no monitor named {name!r}")
    unschedule_monitor(runtime().celery, monitor.name)
    return f"Monitor {monitor.label!r} deleted."


def _find(store: MonitorStore, name: str) -> Monitor:
    """The caller's (or the operator's) monitor of that name; another owner's is not found."""
    who = owner()
    key = name.strip().lower()
    monitor = store.get(scoped_name(key, who)) or store.get(key)  # (the operator's: plain)
    if monitor is None or not _visible(monitor, who):
        known = ", ".join(m.label for m in store.all() if _visible(m, who)) or "none"
        raise ValueError(f"no monitor named {name!r} (monitors: {known})")
    return monitor
