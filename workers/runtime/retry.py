"""Provider calls with exponential backoff, full jitter and Retry-After, within the deadline.

The SDKs' own retries are turned off (``max_retries=0``) so attempts are not multiplied.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt, stop_any
from tenacity.stop import stop_base
from tenacity.wait import wait_random_exponential

T = TypeVar("T")

#: Longest Retry-After honoured, in seconds; a longer one fails the call at once.
MAX_RETRY_AFTER_S = 30.0


class ProviderError(RuntimeError):
    """A provider call failed for good (after retries, or not retryable)."""

    def __init__(self, message: str, *, status: int | None = None, retryable: bool = False,
                 retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retryable = retryable
        self.retry_after = retry_after


def call_with_retry(fn: Callable[[], T], *, attempts: int, base_s: float, cap_s: float,
                    deadline: float) -> T:
    """Call ``fn`` until it succeeds, a non-retryable ProviderError, or attempts/deadline run out.

    ``fn`` raises ProviderError; ``retryable`` and ``retry_after`` steer the next attempt.
    """
    jitter = wait_random_exponential(multiplier=base_s, max=cap_s)

    def wait(state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, ProviderError) and exc.retry_after is not None:
            return exc.retry_after
        return float(jitter(state))


    def retryable(exc: BaseException) -> bool:
        return isinstance(exc, ProviderError) and exc.retryable and (
            exc.retry_after is None or exc.retry_after <= MAX_RETRY_AFTER_S)

    retrying = Retrying(
        stop=stop_any(stop_after_attempt(max(1, attempts)), _StopAtDeadline(deadline)),
        wait=wait,
        retry=retry_if_exception(retryable),
        reraise=True,
    )
    return retrying(fn)


class _StopAtDeadline(stop_base):
    """Stop when the next attempt would start after the deadline."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline

    def __call__(self, state: RetryCallState) -> bool:
        return time.time() + (state.upcoming_sleep or 0.0) >= self.deadline


def retry_after_seconds(headers: object) -> float | None:
    """Seconds from ``retry-after-ms`` or ``retry-after`` (seconds form), if present."""
    get = getattr(headers, "get", None)
    if get is None:
        return None
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = get(name)
        if value is None:
            continue
        try:
            return max(0.0, float(value) * scale)
        except ValueError:
            continue
    return None
