"""Small things: dice, coins and random numbers."""

from __future__ import annotations

import random

from workers.tool_registry.registry import tool

__all__ = ["flip_coin", "random_number", "roll_dice"]

_rng = random.SystemRandom()


@tool(
    examples=(
        "roll a die",
        "roll a {sides} sided die",
        "roll {count} dice",
        "roll {count} {sides} sided dice",
    )
)
def roll_dice(sides: int = 6, count: int = 1) -> str:
    """Roll one or more dice.

    Args:
        sides: Faces on each die (2 to 1000).
        count: How many dice (1 to 20).
    """
    if not 2 <= sides <= 1000:
        raise ValueError("a die must have between 2 and 1000 sides")
    if not 1 <= count <= 20:
        raise ValueError("roll between 1 and 20 dice")
    rolls = [_rng.randint(1, sides) for _ in range(count)]
    if count == 1:
        return f"You rolled a {rolls[0]}."
    return f"You rolled {', '.join(map(str, rolls))}: {sum(rolls)} in total."


@tool(examples=("flip a coin", "toss a coin", "heads or tails"))
def flip_coin() -> str:
    """Flip a coin."""
    return f"It's {_rng.choice(('heads', 'tails'))}."


@tool(
    examples=(
        "pick a random number",
        "pick a number between {low} and {high}",
        "random number from {low} to {high}",
    )
)
def random_number(low: int = 1, high: int = 100) -> str:
    """Pick a random whole number between two bounds (both included).

    Args:
        low: The smallest allowed number.
        high: The largest allowed number.
    """
    if low > high:
        low, high = high, low
    return f"I picked {_rng.randint(low, high)}."
