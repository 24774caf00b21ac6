"""Timers and reminders: when one fires, the device that asked hears it.

They live in Redis (:mod:`timer_store`) and are fired by beat's ``voxqueue.monitor.fire_timers``
task, so they survive restarts of every worker; never Celery countdowns.
"""

from __future__ import annotations

import re
import time
from datetime import datetime

from workers.tool_registry.context import owner, runtime
from workers.tool_registry.registry import ToolReply, tool
from workers.tool_registry.timer_store import Item, TimerStore
from workers.tools.builtin.spoken_time import (
    describe_duration,
    describe_when,
    local_zone,
    parse_duration,
    parse_when,
)

__all__ = ["cancel_timer", "list_timers", "set_reminder", "set_timer"]

MAX_PENDING = 50
_ALL = {"all", "all timers", "everything", "all of them", "all my timers", "all reminders"}
_ANY = {"", "timer", "the timer", "it", "that", "my timer", "reminder", "the reminder"}


def _store() -> TimerStore:
    rt = runtime()
    return TimerStore(rt.redis, rt.keys)


def _name(item: Item) -> str:
    if item.kind == "reminder":
        return f"the reminder to {item.label}"
    if item.label:
        return f"the {item.label} timer"
    return f"the {describe_duration(item.duration_s or 0)} timer"


def _check_room(store: TimerStore, who: str) -> None:
    if len(store.pending(who)) >= MAX_PENDING:
        raise ValueError(f"there are already {MAX_PENDING} timers and reminders; cancel some first")


@tool(
    side_effects=True,
    examples=(
        "set a timer for {duration}",
        "set a {duration} timer",
        "start a timer for {duration}",
        "start a timer for {duration} called {label}",
    ),
)
def set_timer(duration: str, label: str = "") -> ToolReply:
    """Start a countdown timer; the device that asked hears when it ends.

    Args:
        duration: How long, such as "5 minutes", "1 hour 30 minutes" or "90 seconds".
        label: An optional name for the timer, such as "pasta".
    """
    seconds = parse_duration(duration)
    name = re.sub(r"\s+timer$", "", " ".join(label.split()), flags=re.IGNORECASE)[:60]
    spoken = describe_duration(seconds)
    store = _store()
    who = owner()
    _check_room(store, who)
    announce = f"Your {name} timer is done." if name else f"Your {spoken} timer is done."
    item = store.new("timer", who, name, announce, time.time() + seconds, duration_s=seconds)
    what = f"{name.capitalize()} timer" if name else "Timer"
    said = f"{what} set for {spoken}."
    return ToolReply(data=f"{said[:-1]} (id {item.id}).", say=said)


@tool(
    examples=(
        "what timers do I have",
        "list my timers",
        "how much time is left",
        "list my reminders",
    )
)
def list_timers() -> str:
    """List the pending timers and reminders of this device, with the time left."""
    items = _store().pending(owner())
    if not items:
        return "You have no timers or reminders."
    zone = local_zone(runtime().settings.tools.timezone)
    now = datetime.now(zone)
    parts: list[str] = []
    for item in items:
        if item.kind == "timer":
            left = describe_duration(max(1.0, item.left_s))
            parts.append(f"{_name(item)} with {left} left (id {item.id})")
        else:
            due = datetime.fromtimestamp(item.due, zone)
            parts.append(f"{_name(item)} {describe_when(due, now)} (id {item.id})")
    return f"You have {len(items)}: " + "; ".join(parts) + "."


@tool(
    side_effects=True,
    examples=(
        "cancel the timer",
        "cancel the {name_or_id} timer",
        "stop the {name_or_id} timer",
        "cancel the reminder to {name_or_id}",
    ),
)
def cancel_timer(name_or_id: str = "") -> str:
    """Cancel a pending timer or reminder of this device.

    Args:
        name_or_id: The timer's name ("pasta"), its duration ("5 minutes"), a reminder's text,
            its id, or "all"; empty when there is only one.
    """
    store = _store()
    items = store.pending(owner())
    if not items:
        return "There is no timer or reminder to cancel."
    wanted = " ".join(name_or_id.lower().split())
    for pattern in (r"^(the|my)\s+", r"^reminder (to|about)\s+", r"\s+(timer|reminder)$"):
        wanted = re.sub(pattern, "", wanted)
    if wanted in _ALL:
        chosen = items
    elif wanted in _ANY:
        if len(items) > 1:
            raise ValueError(
                "there are several timers and reminders: "
                + "; ".join(f"{_name(i)} (id {i.id})" for i in items)
                + ". Say which one, or 'all'."
            )
        chosen = items
    else:
        chosen = _match(items, wanted)
        if not chosen:
            raise ValueError(
                f"no timer or reminder matches {name_or_id!r}; pending: "
                + "; ".join(f"{_name(i)} (id {i.id})" for i in items)
                + "."
            )
    cancelled = [item for item in chosen if store.cancel(item)]
    if not cancelled:
        return "That one already went off."
    names = ", ".join(_name(i) for i in cancelled)
    return f"Cancelled {names}."


def _match(items: list[Item], wanted: str) -> list[Item]:
    """Items whose id, label or duration is ``wanted`` (exact first, then partial)."""

    def duration_matches(item: Item) -> bool:
        try:
            return (
                item.duration_s is not None and abs(parse_duration(wanted) - item.duration_s) < 0.5
            )
        except ValueError:
            return False

    exact = [i for i in items if wanted in (i.id, i.label.lower()) or duration_matches(i)]
    if exact:
        return exact
    words = set(re.findall(r"\w+", wanted))
    return [i for i in items if words and words <= set(re.findall(r"\w+", i.label.lower()))]


@tool(
    side_effects=True,
    examples=(
        "remind me {when} to {text}",
        "remind me to {text} at {when}",
        "remind me to {text} in {when}",
        "set a reminder {when} to {text}",
    ),
)
def set_reminder(when: str, text: str) -> ToolReply:
    """Set a reminder: at that time the device that asked says the text.

    Args:
        when: When, such as "in 10 minutes", "at 18:30", "tomorrow at 9" or "on Friday at noon".
        text: What to remind about, such as "call mum".
    """
    what = re.sub(r"^(to|that)\s+", "", " ".join(text.split()), flags=re.IGNORECASE)
    what = what.rstrip(".!?")[:200]
    if not what:
        raise ValueError("say what to be reminded about")
    zone = local_zone(runtime().settings.tools.timezone)
    now = datetime.now(zone)
    due = parse_when(when, now)
    store = _store()
    who = owner()
    _check_room(store, who)
    item = store.new("reminder", who, what, f"Reminder: {what}.", due.timestamp())
    said = f"I will remind you to {what} {describe_when(due, now)}."
    return ToolReply(data=f"{said[:-1]} (id {item.id}).", say=said)
