"""Matching a sentence to tool calls with hassil, from the example sentences the tools declare.

Each tool with ``examples`` becomes a hassil intent; its ``{slot}`` names are argument names.
A slot with fixed values (``Literal``/``Enum``) matches only those; any other slot is a
wildcard whose text becomes the argument, numbers said in words turned into digits, and the
arguments are validated by the tool's own model — an interpretation that does not validate is
skipped. A sentence asking for several things ("what time is it in London, and what is the
weather in Berlin") is split into clauses; when every clause matches, each becomes a call.
"""

from __future__ import annotations

import logging
import re
import threading
import weakref
from collections.abc import Collection, Iterator
from dataclasses import dataclass, replace
from typing import Any

from hassil import Intents, recognize_ranked
from hassil.expression import ListReference
from hassil.parse_expression import parse_sentence
from hassil.recognize import RecognizeResult
from pydantic import ValidationError

from workers.intents.vocabulary import choices, is_number
from workers.intents.words_to_numbers import words_to_numbers
from workers.tool_registry.registry import Tool, ToolRegistry

log = logging.getLogger(__name__)

#: Filler that may appear anywhere in a request without changing it.
SKIP_WORDS = ("please", "um", "uh", "hey", "okay", "ok", "so", "can you", "could you", "would you")

#: Where a sentence may be cut into separate requests.
CLAUSE_BREAK = re.compile(
    r"\s*[,;]\s*(?:and\s+)?(?:then\s+|also\s+)?|\s+and\s+(?:then\s+|also\s+)?|\s+then\s+",
    re.IGNORECASE,
)

#: Most clauses tried in one sentence (the split is checked for every run of clauses).
MAX_CLAUSES = 6

#: Leading words a lenient match may drop (noise, or a wake word heard before the request).
MAX_LEADING_NOISE = 3

_NEGATIONS = {"don't", "dont", "do", "not", "never", "no"}

#: An article standing alone in a template, outside slots and optional groups.
_ARTICLE = re.compile(r"(?<![\w{\[|(])(?:the|a|an)(?![\w}\]|)])", re.IGNORECASE)


#: A hyphen joining two words ("20-sided", "mid-grade"): recognizers write both forms.
_JOINED = re.compile(r"(?<=[A-Za-z0-9])-(?=[A-Za-z0-9])")
#: A thousands separator as recognizers write it ("1,000,000").
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
#: A number standing alone (after number words became digits).
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w]|\.\d)")
#: Numbers in a sentence are matched as these tokens: a number slot is then one word, so it
#: can stand next to another slot ("convert {value} {from_unit} to {to_unit}").
_STANDIN = "vqnumber{}"
_STANDIN_RE = re.compile(r"vqnumber(\d+)")
#: Most numbers one clause may hold.
MAX_NUMBERS = 12


def prepared(text: str) -> tuple[str, list[str]]:
    """The sentence as the intents are matched: joined words apart, number words as digits,
    each number a token; and the numbers, in order, to put back."""
    text = words_to_numbers(_THOUSANDS.sub("", _JOINED.sub(" ", text)))
    numbers: list[str] = []

    def token(match: re.Match[str]) -> str:
        if len(numbers) >= MAX_NUMBERS:
            return match.group(0)
        numbers.append(match.group(0))
        return _STANDIN.format(len(numbers) - 1)

    return _NUMBER.sub(token, text), numbers


def restored(value: str, numbers: list[str]) -> str:
    """``value`` with its number tokens back as the numbers they stand for."""
    return _STANDIN_RE.sub(lambda m: numbers[int(m.group(1))], value)


def loosened(template: str) -> str:
    """The template with its articles optional and interchangeable: recognizers drop and
    confuse short words ("what is weather in Madrid", "set the timer for 5 minutes")."""
    return _ARTICLE.sub("[the|a|an]", template)


@dataclass(frozen=True)
class IntentCall:
    """One tool call a sentence asks for."""

    tool: str
    arguments: dict[str, Any]
    clause: str
    """The words that asked for it."""
    skipped: int = 0
    """Leading words a lenient match left out before ``clause``."""


def _slots(template: str) -> Iterator[ListReference]:
    """The ``{list}`` references of a template (hassil syntax)."""
    stack: list[Any] = [parse_sentence(template).expression]
    while stack:
        item = stack.pop()
        if isinstance(item, ListReference):
            yield item
        stack.extend(getattr(item, "items", ()))


class IntentMatcher:
    """The hassil intents of a registry's tools, and the conversion of matches to calls."""

    def __init__(self, registry: ToolRegistry) -> None:
        self.tools: dict[str, Tool] = {}
        self.templates: dict[str, list[str]] = {}
        """Each tool's usable templates (bad ones are logged and left out)."""
        intents: dict[str, Any] = {}
        wildcards: set[str] = set()
        for tool in registry:
            fields = tool.args_model.model_fields
            good: list[str] = []
            lists: dict[str, Any] = {}
            for template in tool.examples:
                try:
                    refs = list(_slots(template))
                except Exception as exc:  # hassil's parse errors have no common base
                    log.warning("tool %s: bad example %r: %s", tool.name, template, exc)
                    continue
                unknown = [r.slot_name for r in refs if r.slot_name not in fields]
                if unknown:
                    log.warning(
                        "tool %s: example %r names %s, not arguments of the tool",
                        tool.name,
                        template,
                        ", ".join(unknown),
                    )
                    continue
                for ref in refs:
                    annotation = fields[ref.slot_name].annotation
                    fixed = choices(annotation)
                    if is_number(annotation):
                        lists[ref.list_name] = {"values": [
                            _STANDIN.format(i) for i in range(MAX_NUMBERS)]}
                    elif fixed is None:
                        wildcards.add(ref.list_name)
                    else:
                        lists[ref.list_name] = {
                            "values": [{"in": v.replace("_", " "), "out": v} for v in fixed]
                        }
                good.append(template)
            if not good:
                continue
            self.tools[tool.name] = tool
            self.templates[tool.name] = good
            intents[tool.name] = {"data": [{"sentences": [loosened(t) for t in good],
                                            "lists": lists}]}
        self.intents = Intents.from_dict(
            {
                "language": "en",
                "intents": intents,
                "lists": {name: {"wildcard": True} for name in sorted(wildcards)},
                "skip_words": list(SKIP_WORDS),
            }
        )

    # -- one clause ------------------------------------------------------------------------
    def candidates(
        self, text: str, allowed: Collection[str] | None = None, *, lenient: bool = False
    ) -> list[IntentCall]:
        """Every valid interpretation of one request, best first.

        ``lenient`` also tries without the first few words (noise, or a wake word heard
        before the request), never dropping a negation.
        """
        text = text.strip()
        if not text or not self.tools:
            return []
        found = self._interpretations(text, allowed)
        if found or not lenient:
            return found
        words = text.split()
        for n in range(1, MAX_LEADING_NOISE + 1):
            if len(words) - n < 2 or words[n - 1].lower().strip(",.") in _NEGATIONS:
                break
            found = self._interpretations(" ".join(words[n:]), allowed)
            if found:
                return [replace(call, skipped=n) for call in found]
        return []

    def _interpretations(self, text: str, allowed: Collection[str] | None) -> list[IntentCall]:
        calls: list[IntentCall] = []
        seen: set[tuple[str, str]] = set()
        matched, numbers = prepared(text)
        for result in recognize_ranked(matched, self.intents):
            name = result.intent.name
            if allowed is not None and name not in allowed:
                continue
            arguments = self._arguments(self.tools[name], result, matched, numbers)
            if arguments is None:
                continue
            key = (name, repr(sorted(arguments.items())))
            if key not in seen:
                seen.add(key)
                calls.append(IntentCall(name, arguments, text))
        return calls

    def _arguments(self, tool: Tool, result: RecognizeResult, text: str,
                   numbers: list[str]) -> dict[str, Any] | None:
        """The match's slots as validated arguments, or None when they do not fit the tool."""
        raw: dict[str, Any] = {}
        for name, entity in result.entities.items():
            value = entity.value
            if entity.is_wildcard and entity.text_span is not None:
                value = text[entity.text_span[0] : entity.text_span[1]]  # punctuation kept
            if isinstance(value, str):
                value = restored(value, numbers).strip(" \t,.;:!?\"'")
                if not value:
                    return None
            raw[name] = value
        try:
            model = tool.args_model.model_validate(raw)
        except ValidationError:
            return None
        return model.model_dump(mode="json", include=set(raw))

    # -- a whole sentence ------------------------------------------------------------------
    def match(
        self, text: str, allowed: Collection[str] | None = None, *, lenient: bool = False
    ) -> list[IntentCall]:
        """The calls a sentence asks for: one per clause, or [] when it is not understood.

        A split into several clauses that all match wins over one call for the whole
        sentence (whose wildcard would swallow the other requests).
        """
        pieces = _clauses(text)
        if 1 < len(pieces) <= MAX_CLAUSES:
            split = self._best_split(text, pieces, allowed, lenient)
            if split is not None and len(split) > 1:
                return split
        found = self.candidates(text, allowed, lenient=lenient)
        return found[:1]

    def _best_split(
        self,
        text: str,
        pieces: list[tuple[int, int]],
        allowed: Collection[str] | None,
        lenient: bool,
    ) -> list[IntentCall] | None:
        """The split of the sentence into the most clauses that each match, if any."""
        n = len(pieces)
        best: list[list[IntentCall] | None] = [None] * (n + 1)
        best[0] = []
        for end in range(1, n + 1):
            for start in range(end):
                before = best[start]
                if before is None:
                    continue
                clause = text[pieces[start][0] : pieces[end - 1][1]]
                found = self.candidates(clause, allowed, lenient=lenient and start == 0)
                if not found:
                    continue
                option = [*before, found[0]]
                current = best[end]
                if current is None or len(option) > len(current):
                    best[end] = option
        return best[n]


def _clauses(text: str) -> list[tuple[int, int]]:
    """Spans of the pieces between clause breaks."""
    spans: list[tuple[int, int]] = []
    start = 0
    for brk in CLAUSE_BREAK.finditer(text):
        if brk.start() > start:
            spans.append((start, brk.start()))
        start = brk.end()
    if start < len(text):
        spans.append((start, len(text)))
    return [(a, b) for a, b in spans if text[a:b].strip(" .?!")]


_cache: weakref.WeakKeyDictionary[ToolRegistry, tuple[int, IntentMatcher]] = (
    weakref.WeakKeyDictionary()
)
_cache_lock = threading.Lock()


def matcher_for(registry: ToolRegistry) -> IntentMatcher:
    """The registry's matcher, built once (and again if tools were added since)."""
    with _cache_lock:
        cached = _cache.get(registry)
        if cached is None or cached[0] != len(registry):
            cached = (len(registry), IntentMatcher(registry))
            _cache[registry] = cached
        return cached[1]
