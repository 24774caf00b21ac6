"""Alert conditions: small comparisons joined by ``or`` / ``and`` (``and`` binds tighter).

A clause is ``[field] <op> <value>`` (ops ``< <= > >= == != =``; the value a number, a quoted
string or a bare word), ``contains <text>`` or ``not contains <text>``. Fields are looked up in
the values a check measured: ``status``/``latency`` for HTTP, a dotted JSON path such as
``bitcoin.usd`` or ``items[0].price`` for JSON; a clause with no field compares the check's
main value. Parsed once, evaluated with no ``eval``.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "<=": operator.le,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    ">": operator.gt,
    "=": operator.eq,
}
_COMPARE = re.compile(
    r"^(?P<field>[^<>=!\s]*)\s*(?P<op><=|>=|==|!=|<|>|=)\s*(?P<value>[^<>=!\s].*)$"
)
_CONTAINS = re.compile(r"^(?P<neg>not\s+|!)?contains\s+(?P<text>.+)$", re.IGNORECASE)
#: " or " / " and " outside double quotes.
_JOIN = r"\s+{word}\s+(?=(?:[^\"]*\"[^\"]*\")*[^\"]*$)"


class ConditionError(ValueError):
    """A condition that cannot be parsed, or a field the check did not measure."""


@dataclass(frozen=True)
class Clause:
    field: str
    op: str
    value: float | str

    def holds(self, lookup: Callable[[str], Any], text: str) -> bool:
        if self.op in ("contains", "not contains"):
            found = str(self.value).lower() in text.lower()
            return found if self.op == "contains" else not found
        actual = lookup(self.field)
        expected = self.value
        if isinstance(expected, float):
            try:
                number = float(actual)
            except (TypeError, ValueError):
                raise ConditionError(
                    f"{self.field or 'the value'} is {actual!r}, not a number"
                ) from None
            return _OPS[self.op](number, expected)
        if self.op not in ("==", "!=", "="):
            raise ConditionError(f"only == and != compare text ({self})")
        words = "" if actual is None else str(actual)
        return _OPS[self.op](words.lower(), expected.lower())

    def __str__(self) -> str:
        if self.op in ("contains", "not contains"):
            text = str(self.value)
            return f'{self.op} "{text}"' if re.search(r"\s", text) else f"{self.op} {text}"
        value = f"{self.value:g}" if isinstance(self.value, float) else f'"{self.value}"'
        return f"{self.field} {self.op} {value}".strip()


@dataclass(frozen=True)
class Condition:
    """Alternatives (``or``) of conjunctions (``and``) of clauses."""

    any_of: tuple[tuple[Clause, ...], ...]

    def holds(self, lookup: Callable[[str], Any], text: str = "") -> bool:
        return any(all(c.holds(lookup, text) for c in group) for group in self.any_of)

    @property
    def fields(self) -> set[str]:
        return {
            c.field
            for group in self.any_of
            for c in group
            if c.op not in ("contains", "not contains")
        }

    def __str__(self) -> str:
        return " or ".join(" and ".join(str(c) for c in group) for group in self.any_of)


def _value(raw: str) -> float | str:
    raw = raw.strip()
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "\"'":
        return raw[1:-1]
    try:
        return float(raw.replace("_", ""))
    except ValueError:
        return raw


def parse_clause(text: str) -> Clause:
    text = text.strip()
    if found := _CONTAINS.match(text):
        op = "not contains" if found["neg"] else "contains"
        return Clause("", op, str(_value(found["text"])))
    if found := _COMPARE.match(text):
        value = _value(found["value"])
        if isinstance(value, str) and found["op"] not in ("==", "!=", "="):
            raise ConditionError(f"only == and != compare text, not {found['op']} ({text!r})")
        return Clause(found["field"], found["op"], value)
    raise ConditionError(
        f"cannot read the condition {text!r}: write a comparison such as 'status >= 400', "
        "'bitcoin.usd > 70000' or '> 100', or 'contains <text>'"
    )


def parse(text: str) -> Condition:
    """The condition in ``text`` (ConditionError when it cannot be read)."""
    if not text.strip():
        raise ConditionError("the condition is empty")
    groups = []
    for alternative in re.split(_JOIN.format(word="or"), text.strip(), flags=re.IGNORECASE):
        parts = re.split(_JOIN.format(word="and"), alternative, flags=re.IGNORECASE)
        groups.append(tuple(parse_clause(p) for p in parts))
    return Condition(tuple(groups))


def json_path(data: Any, path: str) -> Any:
    """The value at a dotted path (``a.b.0.c`` or ``a.b[0].c``) of decoded JSON."""
    current = data
    for part in re.findall(r"[^.\[\]]+", path):
        if isinstance(current, list):
            try:
                current = current[int(part)]
            except (ValueError, IndexError):
                raise ConditionError(f"no item {part!r} at {path!r}") from None
        elif isinstance(current, dict) and part in current:
            current = current[part]
        else:
            raise ConditionError(f"no value at {path!r} (missing {part!r})")
    return current
