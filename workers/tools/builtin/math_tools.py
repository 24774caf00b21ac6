"""Maths tools."""

from __future__ import annotations

from workers.tools.builtin.safe_math import evaluate, format_number
from workers.tools.registry import tool

__all__ = ["calculate"]


@tool(examples=("what is {expression}", "calculate {expression}"))
def calculate(expression: str) -> str:
    """Evaluate an arithmetic expression exactly (no code is run).

    Args:
        expression: Arithmetic such as "12 * 13", "(2 + 3) ** 2", "sqrt(16)" or "20 percent of 50".
    """
    return f"{expression} = {format_number(evaluate(expression))}"
