"""What the offline agent says: tool results through their response templates, a short
apology for a failed call, and the reply to a request it cannot handle offline."""

from __future__ import annotations

import logging
import re
from string import Formatter
from typing import Any

from hassil import sample_expression
from hassil.parse_expression import parse_sentence

from workers.intents.matcher import IntentMatcher
from workers.intents.vocabulary import is_number, spoken_values
from workers.tool_registry.registry import Tool

log = logging.getLogger(__name__)

#: How many example requests the "can't answer offline" reply names.
EXAMPLES_IN_REPLY = 3

_ERROR_PREFIX = re.compile(
    r"^(?:Error:\s*)?(?:[\w.-]+ failed:\s*)?(?:[A-Z]\w*(?:Error|Exception):\s*)?"
)

# A call that could not reach its service over the network (as the tools' HTTP client and the
# resolver word it): said plainly, without host names and error numbers read aloud.
_UNREACHABLE = re.compile(
    r"cannot resolve host|has no address|name or service not known|name resolution|"
    r"connection refused|network is unreachable|no route to host|timed out|cannot connect|"
    r"could not connect|connecterror|connecttimeout", re.IGNORECASE)
_ERRNO = re.compile(r"\[Errno -?\d+\]\s*")
# A service that answered with an HTTP error status: its 5xx or 429 means "not now".
_HTTP_STATUS = re.compile(r"\bHTTP (\d{3})\b")
# A web address in an error: not read aloud.
_ADDRESS = re.compile(r"\b(?:https?://|www\.)\S+", re.IGNORECASE)


class _Blank(dict[str, Any]):
    def __missing__(self, key: str) -> str:
        return ""


def render_result(tool: Tool | None, arguments: dict[str, Any], result: str) -> str:
    """A successful call's answer: the tool's ``response`` template, else the result itself."""
    template = tool.response if tool is not None else None
    if not template:
        return result.strip()
    values = _Blank(arguments)
    values["result"] = result.strip()
    try:
        return Formatter().vformat(template, (), values).strip()
    except (ValueError, IndexError, AttributeError):
        return result.strip()


def error_gist(message: str, limit: int = 200) -> str:
    """The useful part of a tool error message: no "Error:"/"x failed:"/exception-name prefix."""
    text = _ERROR_PREFIX.sub("", message.strip(), count=1).strip()
    if len(text) > limit:
        text = text[:limit].rsplit(" ", 1)[0] + "…"
    return text


def apology(message: str, service: str | None = None) -> str:
    """A failed call said in a sentence for a person: a service out of reach or failing as such
    (named by the tool's ``service``), else the error's gist without error numbers or web
    addresses. The model and the turn's events keep the whole message."""
    where = service or "that service"
    if _UNREACHABLE.search(message):
        return f"Sorry, I can't reach {where} right now."
    if status := _HTTP_STATUS.search(message):
        if status.group(1).startswith("5") or status.group(1) == "429":
            return f"Sorry, {where} isn't answering right now."
        return f"Sorry, {where} turned that request down."
    gist = _ADDRESS.sub("it", _ERRNO.sub("", error_gist(message)))
    if not gist:
        return "Sorry, that didn't work."
    return f"Sorry, that didn't work: {gist.rstrip('.')}."


def example_request(tool: Tool, templates: list[str]) -> str | None:
    """A sentence that asks the tool for something, its slots filled with likely values."""
    fields = tool.args_model.model_fields
    for template in templates:  # the tool's own order: its first example is its main one
        try:
            expanded = list(
                sample_expression(parse_sentence(template).expression, expand_lists=False)
            )
        except Exception:  # hassil raises several unrelated error types
            log.debug("cannot expand %r", template, exc_info=True)
            continue
        for sentence in expanded:
            filled, unknown = _fill(sentence, fields)
            if filled and not unknown:
                return filled
    return None


def _fill(sentence: str, fields: dict[str, Any]) -> tuple[str, bool]:
    unknown = False

    def value(match: re.Match[str]) -> str:
        nonlocal unknown
        slot = match.group(1).split(":")[-1]
        field = fields.get(slot)
        if field is None:
            unknown = True
            return ""
        if is_number(field.annotation):
            return "three"
        values = spoken_values(slot, field.annotation)
        if not values:
            unknown = True
            return ""
        return values[0].title() if values[0].isalpha() and len(values[0]) > 3 else values[0]

    text = re.sub(r"\{([^}]+)\}", value, sentence)
    return " ".join(text.split()), unknown


def offline_reply(matcher: IntentMatcher, allowed: set[str] | None = None) -> str:
    """The answer to a request the local intents do not understand, naming a few they do."""
    examples: list[str] = []
    names = [n for n in sorted(matcher.tools) if allowed is None or n in allowed]
    requests = [
        r
        for n in names
        if (r := example_request(matcher.tools[n], matcher.templates[n])) is not None
    ]
    if requests:
        step = max(1, len(requests) // EXAMPLES_IN_REPLY)
        examples = requests[::step][:EXAMPLES_IN_REPLY]
    text = "Sorry, I can't answer that offline."
    if not examples:
        return text
    listed = (
        examples[0] if len(examples) == 1 else (", ".join(examples[:-1]) + f", or {examples[-1]}")
    )
    return f"{text} You can ask me things like: {listed}."
