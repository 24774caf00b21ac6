"""The confirmation question the system itself asks for one pending side effect, built from
the exact call (tool, target, arguments): "Unlock the front door?". A short template per
built-in side-effecting tool, and "Run <tool> with <arguments>?" for any other.

Pure: nothing here reads Redis or settings (``workers.tools.guard`` and the agent use it).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

#: The turn hash's field holding the action the turn's yes confirmed ("" for none).
CONFIRMED_FIELD = "confirmed"
#: A tool outcome's code: held back for the person's yes (the system asks them).
NEEDS_CONFIRMATION = "needs-confirmation"
#: A tool outcome's code: refused in a confirming turn (not asked about either).
NOT_CONFIRMED = "not-confirmed"

#: The longest question (characters); a longer one is cut with an ellipsis.
MAX_QUESTION_CHARS = 400
#: The longest argument value quoted in a question (characters).
MAX_VALUE_CHARS = 160

#: Home Assistant services as a verb ("lock.unlock" says "unlock").
_SERVICE_VERBS = {
    "turn_on": "turn on", "turn_off": "turn off", "toggle": "toggle", "unlock": "unlock",
    "lock": "lock", "open": "open", "open_cover": "open", "close_cover": "close",
    "stop_cover": "stop", "alarm_disarm": "disarm", "alarm_arm_away": "arm (away)",
    "alarm_arm_home": "arm (home)", "alarm_arm_night": "arm (night)",
    "set_temperature": "set the temperature of", "media_play": "play", "media_pause": "pause",
    "media_stop": "stop", "volume_set": "set the volume of",
}


def _value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False,
                                                           default=str)
    text = " ".join(text.split())
    return text if len(text) <= MAX_VALUE_CHARS else text[:MAX_VALUE_CHARS - 1] + "…"


def _quoted(value: Any) -> str:
    return f'"{_value(value)}"'


#: The kind of thing an entity of a domain is, said after its name when the name lacks it.
_DOMAIN_NOUNS = {"light": "light", "switch": "switch", "fan": "fan",
                 "alarm_control_panel": "alarm"}


def _entity(entity_id: str) -> str:
    """``lock.front_door`` as "the front door", ``light.kitchen`` as "the kitchen light"."""
    domain, _, name = entity_id.rpartition(".")
    words = name.replace("_", " ")
    noun = _DOMAIN_NOUNS.get(domain)
    return f"the {words} {noun}" if noun and noun not in words.split() else f"the {words}"


def _home(a: Mapping[str, Any]) -> str:
    domain, service = str(a.get("domain") or ""), str(a.get("service") or "")
    entities = [e.strip() for e in str(a.get("entity_id") or "").split(",") if e.strip()]
    data = a.get("data") or {}
    verb = _SERVICE_VERBS.get(service, service.replace("_", " "))
    if entities:
        text = f"{verb} {' and '.join(_entity(e) for e in entities)}"
    else:
        text = f"call the Home Assistant service {domain} {service.replace('_', ' ')}"
    if isinstance(data, Mapping) and data:
        text += " with " + ", ".join(f"{str(k).replace('_', ' ')} {_value(v)}"
                                     for k, v in data.items())
    return text


def _notification(a: Mapping[str, Any]) -> str:
    title = f" titled {_quoted(a['title'])}" if a.get("title") else ""
    return f"send the notification {_quoted(a.get('message', ''))}{title}"


def _timer(a: Mapping[str, Any]) -> str:
    label = f" called {_quoted(a['label'])}" if a.get("label") else ""
    return f"set a timer for {_value(a.get('duration', ''))}{label}"


def _cancel_timer(a: Mapping[str, Any]) -> str:
    name = a.get("name_or_id")
    return f"cancel the timer {_quoted(name)}" if name else "cancel the timer"


def _monitor(a: Mapping[str, Any]) -> str:
    what = _value(a.get("target") or a.get("kind") or "")
    when = f" for {_quoted(a['condition'])}" if a.get("condition") else ""
    every = a.get("every")
    often = f", every {every:g} seconds" if isinstance(every, int | float) else ""
    return f"start watching {what}{when}{often}"


_TEMPLATES: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "home_assistant_call": _home,
    "remember": lambda a: f"remember {_quoted(a.get('fact', ''))}",
    "forget": lambda a: f"forget what I remember about {_quoted(a.get('query', ''))}",
    "send_notification": _notification,
    "set_timer": _timer,
    "cancel_timer": _cancel_timer,
    "set_reminder": lambda a: (f"set a reminder {_value(a.get('when', ''))}: "
                               f"{_quoted(a.get('text', ''))}"),
    "create_monitor": _monitor,
    "delete_monitor": lambda a: f"delete the monitor {_quoted(a.get('name', ''))}",
}


def generic_question(tool: str, arguments: Mapping[str, Any]) -> str:
    """"Run record side effect with label "x"?": the tool and every argument given."""
    shown = ", ".join(f"{str(k).replace('_', ' ')} "
                      f"{_quoted(v) if isinstance(v, str) else _value(v)}"
                      for k, v in arguments.items() if v not in (None, "", {}, []))
    return _finish(f"run {tool.replace('_', ' ')}" + (f" with {shown}" if shown else ""))


def question_for(tool: str, arguments: Mapping[str, Any]) -> str:
    """The question for one exact call, as the person will hear it."""
    template = _TEMPLATES.get(tool)
    if template is not None:
        try:
            return _finish(template(arguments))
        except (TypeError, ValueError, AttributeError, KeyError):
            pass  # arguments of an unexpected shape: say them all
    return generic_question(tool, arguments)


def _finish(text: str) -> str:
    text = " ".join(text.split())
    if len(text) > MAX_QUESTION_CHARS - 1:
        text = text[:MAX_QUESTION_CHARS - 2] + "…"
    return text[:1].upper() + text[1:] + "?"
