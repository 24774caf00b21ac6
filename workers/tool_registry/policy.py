"""Pure rules on what the model may do: a spoken yes, hosts the person named, allow-list
patterns, a tool action's identity, and the cap on tool calls per answer.

Nothing here reads Redis or settings; :mod:`workers.tools.guard` and the tools apply them.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

import httpx

T = TypeVar("T")

#: Phrases that say yes; a confirming utterance is made only of these and of ``_FILLERS``.
_YES = frozenset({
    "yes", "yeah", "yea", "yep", "yup", "sure", "ok", "okay", "do it", "do that", "go ahead",
    "please do", "confirm", "confirmed", "i confirm", "correct", "affirmative", "absolutely",
    "of course", "go for it", "yes please",
})
_FILLERS = frozenset({"please", "thanks", "thank you", "now", "then"})
#: Any of these words anywhere and the utterance is not a yes.
_NEGATIONS = frozenset({
    "no", "not", "don't", "dont", "never", "nope", "nah", "stop", "cancel", "wait", "without",
    "doesn't", "isn't", "shouldn't", "won't", "can't", "cannot", "negative",
})
_MAX_YES_WORDS = 8
_HOST = re.compile(
    r"(?<![\w@.-])(?:https?://)?"
    r"((?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z][a-z0-9-]{0,61}[a-z0-9]"
    r"|\d{1,3}(?:\.\d{1,3}){3})"
)


def is_yes(text: str) -> bool:
    """True when the whole utterance is a plain yes ("yes", "yeah, go ahead", "sure, do it
    please"); anything else, any negation, or more than a few words is not."""
    words = re.sub(r"[^a-z' ]+", " ", text.lower().replace("\u2019", "'")).split()
    if not words or len(words) > _MAX_YES_WORDS or any(w in _NEGATIONS for w in words):
        return False
    said_yes, i = False, 0
    while i < len(words):
        for size in (3, 2, 1):
            phrase = " ".join(words[i:i + size])
            if len(words) - i >= size and (phrase in _YES or phrase in _FILLERS):
                said_yes = said_yes or phrase in _YES
                i += size
                break
        else:
            return False
    return said_yes


def named_hosts(text: str) -> set[str]:
    """Host names and IPv4 addresses in the person's words ("example.com", "example dot
    com"), and the host of every URL they wrote ("http://localhost:8080/x"), lower-cased,
    without a leading ``www.``."""
    spoken = re.sub(r"\s+dot\s+", ".", text.lower())
    found = {m.group(1) for m in _HOST.finditer(spoken)}
    for word in spoken.split():
        if "://" in word:
            with contextlib.suppress(httpx.InvalidURL, TypeError):
                found.add(httpx.URL(word.strip("<>\"'(),")).host)
    return {host.removeprefix("www.") for host in found if host}


def host_in(host: str, entries: Iterable[str]) -> bool:
    """Whether ``host`` is one of ``entries`` or a subdomain of one (``*.`` and ``www.``
    prefixes of an entry are ignored)."""
    name = host.lower().rstrip(".").removeprefix("www.")
    for raw in entries:
        entry = raw.strip().lower().rstrip(".").removeprefix("*.").removeprefix("www.")
        if entry and (name == entry or name.endswith("." + entry)):
            return True
    return False


def split_list(value: str) -> list[str]:
    """A comma-separated setting as its non-empty items."""
    return [item.strip() for item in value.split(",") if item.strip()]


def matches_any(name: str, patterns: Iterable[str]) -> bool:
    """Whether ``name`` matches one of the shell-style ``patterns`` (case-insensitive)."""
    lowered = name.strip().lower()
    return any(fnmatch.fnmatchcase(lowered, p.strip().lower()) for p in patterns if p.strip())


def action_key(tool: str, arguments: Mapping[str, Any]) -> str:
    """One string per exact action: the tool and its arguments, canonical JSON."""
    return json.dumps({"tool": tool, "arguments": dict(arguments)}, sort_keys=True,
                      separators=(",", ":"), ensure_ascii=False, default=str)


def cap_calls(calls: Sequence[T], limit: int) -> tuple[list[T], list[T]]:
    """The calls to run (the first ``limit``, in order) and those refused beyond it."""
    keep = max(0, limit)
    return list(calls[:keep]), list(calls[keep:])


def capped_message(limit: int) -> str:
    """The tool message a refused call gets (same ``tool_call_id``) in place of a result."""
    return (f"Error: not run: at most {limit} tool calls run per answer. Call the tools that "
            "are still needed in your next answer.")
