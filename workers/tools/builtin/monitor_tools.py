"""Monitors the agent creates for the person: watch a site, a value or the system itself, and
tell them when it changes (at their next turn, and at once on their device when urgent)."""

from __future__ import annotations

import time

from celery import Celery
from pydantic import ValidationError

from workers.monitor.monitors import Kind, Monitor, MonitorStore, name_for
from workers.tools.builtin._deps import runtime
from workers.tools.context import current_call
from workers.tools.net import Allowlist, check_url
from workers.tools.registry import tool

__all__ = ["create_monitor", "delete_monitor", "list_monitors", "monitor_status"]


def _store() -> MonitorStore:
    rt = runtime()
    return MonitorStore(rt.redis, rt.keys)


def _app() -> Celery:
    from workers.app import app

    return app


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
    if store.count() >= rt.settings.monitor_max_count:
        raise ValueError(
            f"there are already {rt.settings.monitor_max_count} monitors: delete one first"
        )
    chosen = " ".join(name.lower().split()).replace(" ", "-") or name_for(kind, target)
    if not name and store.get(chosen) is not None:
        chosen = next(f"{chosen}-{n}" for n in range(2, 1000) if store.get(f"{chosen}-{n}") is None)
    shortest = rt.settings.monitor_min_every_s
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
        check_url(monitor.target, Allowlist.parse(rt.settings.url_allowlist))
    if not store.save(monitor):
        raise ValueError(f"a monitor named {chosen!r} exists already: pick another name")
    from workers.monitor.schedule import RUN_CHECK, schedule_monitor

    app = _app()
    schedule_monitor(app, monitor)
    app.send_task(RUN_CHECK, args=[monitor.name])  # the first check sets the baseline now
    note = f" (the shortest interval allowed is {shortest:g} s)" if every < shortest else ""
    return (
        f"Monitor {monitor.name!r} created: watching {monitor.describe().split(': ', 1)[1]}"
        f"{note}. I'll tell you when that changes."
    )


@tool(examples=("list my monitors", "what are you monitoring", "which monitors are running"))
def list_monitors() -> str:
    """List the monitors: what each watches, how often, and its current state."""
    store = _store()
    monitors = store.all()
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
    )
)
def monitor_status(name: str) -> str:
    """Tell how one monitor is doing: its state, since when, and its last check.

    Args:
        name: The monitor's name, as list_monitors gives it.
    """
    store = _store()
    monitor = store.get(name.strip().lower())
    if monitor is None:
        known = ", ".join(m.name for m in store.all()) or "none"
        raise ValueError(f"no monitor named {name!r} (monitors: {known})")
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
    from workers.monitor.schedule import unschedule_monitor

    store = _store()
    chosen = name.strip().lower()
    if not store.delete(chosen):
        known = ", ".join(m.name for m in store.all()) or "none"
        raise ValueError(f"no monitor named {name!r} (monitors: {known})")
    unschedule_monitor(_app(), chosen)
    return f"Monitor {chosen!r} deleted."
