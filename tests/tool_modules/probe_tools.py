"""Tools for the integration tests, loaded by workers through VOXQUEUE_TOOL_MODULES."""

from __future__ import annotations

import time

from workers.tools import current_call, tool


def sleep_one(label: str) -> str:
    """Sleep one second, then answer with the label.

    Args:
        label: Any text, echoed back.
    """
    time.sleep(1.0)
    return f"slept:{label}"


def explode(reason: str) -> str:
    """Always fail with the given reason.

    Args:
        reason: The error message.
    """
    raise RuntimeError(reason)


@tool(timeout_s=0.5)
def hang(seconds: float) -> str:
    """Sleep longer than this tool's 0.5 s timeout.

    Args:
        seconds: How long to sleep.
    """
    time.sleep(seconds)
    return "woke up"


def add_numbers(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: First number.
        b: Second number.
    """
    return a + b


def whoami() -> str:
    """Say which turn and session this call belongs to."""
    call = current_call()
    assert call is not None
    return f"{call.session_id}/{call.call_id}"
