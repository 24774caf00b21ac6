"""Maths tools: exact arithmetic and unit conversion (with pint's unit definitions)."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Annotated, Any

from pydantic import AfterValidator

from workers.tool_registry.registry import tool
from workers.tools.builtin.safe_math import (
    CalculationError,
    check_arithmetic,
    evaluate,
    format_number,
)

__all__ = ["calculate", "convert_units"]

# Spoken names pint does not know as they are said.
_UNIT_ALIASES = {
    "c": "degC",
    "celsius": "degC",
    "centigrade": "degC",
    "degrees celsius": "degC",
    "degree celsius": "degC",
    "degrees centigrade": "degC",
    "f": "degF",
    "fahrenheit": "degF",
    "degrees fahrenheit": "degF",
    "degree fahrenheit": "degF",
    "kelvin": "kelvin",
    "k": "kelvin",
    "kph": "km/hour",
    "kmh": "km/hour",
    "km/h": "km/hour",
    "mph": "mile/hour",
}


def _arithmetic(expression: str) -> str:
    """Only arithmetic: "weather in madrid" is not an expression to guess at."""
    try:
        check_arithmetic(expression)
    except CalculationError as exc:
        raise ValueError(f"not arithmetic: {exc}") from None
    return expression


Arithmetic = Annotated[str, AfterValidator(_arithmetic)]


@tool(examples=("what is {expression}", "calculate {expression}", "how much is {expression}"))
def calculate(expression: Arithmetic) -> str:
    """Evaluate an arithmetic expression exactly (no code is run).

    Args:
        expression: Arithmetic such as "12 * 13", "(2 + 3) ** 2", "sqrt(16)" or "20 percent of 50".
    """
    return f"{_spoken(expression)} is {format_number(evaluate(expression))}."


_OPERATORS = (("**", " to the power of "), ("^", " to the power of "), ("*", " times "),
              ("\u00d7", " times "), ("/", " divided by "), ("\u00f7", " divided by "),
              ("+", " plus "),
              ("%", " modulo "))


def _spoken(expression: str) -> str:
    """The expression as it is said ("12 * 13" → "12 times 13"), for an answer read aloud."""
    text = expression
    for symbol, words in _OPERATORS:
        text = text.replace(symbol, words)
    text = re.sub(r"(?<=\S)\s*-\s*(?=\d|\()", " minus ", text)
    return " ".join(text.split())


@tool(
    examples=(
        "convert {value} {from_unit} to {to_unit}",
        "how many {to_unit} is {value} {from_unit}",
        "how many {to_unit} are in {value} {from_unit}",
        "what is {value} {from_unit} in {to_unit}",
    )
)
def convert_units(value: float, from_unit: str, to_unit: str) -> str:
    """Convert a quantity between units of length, mass, volume, temperature, speed, energy...

    Args:
        value: The amount to convert, such as 10.
        from_unit: The unit it is in, such as "km", "pounds", "cups", "celsius" or "mph".
        to_unit: The unit wanted, such as "miles", "kg", "ml", "fahrenheit" or "km/h".
    """
    import pint

    registry = _registry()
    source, target = _unit(from_unit), _unit(to_unit)
    try:
        result = registry.Quantity(value, source).to(target).magnitude
    except pint.DimensionalityError:
        kinds = (_dimension(registry, source), _dimension(registry, target))
        raise ValueError(
            f"cannot convert {from_unit} to {to_unit}: one measures "
            f"{kinds[0]}, the other {kinds[1]}"
        ) from None
    return f"{format_number(value)} {from_unit} is {_round(result)} {to_unit}."


@lru_cache(maxsize=1)
def _registry() -> Any:
    """One pint registry per process (building one takes a fraction of a second)."""
    import pint

    return pint.UnitRegistry()


def _unit(spoken: str) -> Any:
    """Parse a unit as people say it ("degrees celsius", "miles per hour", "light years")."""
    import pint

    name = " ".join(spoken.strip().lower().split())
    if not name:
        raise ValueError("a unit is needed, such as 'km' or 'pounds'")
    name = _UNIT_ALIASES.get(name, name)
    name = re.sub(r"\s+per\s+", "/", name)
    registry = _registry()
    for candidate in (name, name.replace(" ", "_"), re.sub(r"s\b", "", name).replace(" ", "_")):
        try:
            return registry.parse_units(candidate)
        except (pint.UndefinedUnitError, AttributeError, TypeError, ValueError, SyntaxError):
            continue
    raise ValueError(
        f"unknown unit {spoken!r}; try a name such as 'kilometers', 'pounds', "
        "'liters', 'fahrenheit' or 'miles per hour'"
    )


def _dimension(registry: Any, unit: Any) -> str:
    dims = str(registry.Quantity(1, unit).dimensionality)
    return dims.replace("[", "").replace("]", "") or "nothing (no dimension)"


def _round(value: float) -> str:
    """Four significant digits, without scientific notation for everyday sizes."""
    if value == 0:
        return "0"
    if 1e-4 <= abs(value) < 1e12:
        digits = max(0, 3 - int(f"{abs(value):e}".split("e")[1]))
        text = f"{value:.{digits}f}"
        return text.rstrip("0").rstrip(".") if "." in text else text
    return f"{value:.4g}"
