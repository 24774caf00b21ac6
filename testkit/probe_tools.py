"""Tools for the integration tests, loaded by workers through VOXQUEUE_TOOL_MODULES."""

from __future__ import annotations

import time
import uuid

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


#: Count the action once per idempotency key, in one step (an effect and its key together).
_ONCE_PER_KEY = """
if redis.call('set', KEYS[1], '1', 'NX', 'EX', 3600) then return redis.call('incr', KEYS[2]) end
return tonumber(redis.call('get', KEYS[2]))
"""


@tool(side_effects=True, idempotent=True)
def record_side_effect(label: str) -> str:
    """Count one real-world action under a label, then take three seconds to finish.

    Args:
        label: The counter to increment.
    """
    from workers.tool_registry.context import runtime

    call = current_call()
    key = call.idempotency_key if call is not None else uuid.uuid4().hex
    count = runtime().redis.eval(_ONCE_PER_KEY, 2, f"probe:side-effect-key:{key}",
                                 f"probe:side-effect:{label}")
    time.sleep(3.0)
    return f"done {count}"


@tool(side_effects=True)
def record_side_effect_at_most_once(label: str) -> str:
    """Count one real-world action under a label (with no idempotency key: never run again
    after a crash), then take three seconds to finish.

    Args:
        label: The counter to increment.
    """
    from workers.tool_registry.context import runtime

    count = runtime().redis.incr(f"probe:side-effect:{label}")
    time.sleep(3.0)
    return f"done {count}"


def kill_my_worker() -> str:
    """Kill the worker process that runs this call (a poison task)."""
    import os
    import signal

    os.kill(os.getpid(), signal.SIGKILL)
    return "unreachable"
