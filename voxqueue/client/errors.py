"""What the client API raises before anything runs: refused input, an unreachable server."""

from __future__ import annotations

from voxqueue.contracts import ErrorCode


class InputError(ValueError):
    """Input refused before anything was enqueued."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class Unavailable(RuntimeError):
    """Redis (the broker) cannot be reached: nothing was enqueued."""

    code = ErrorCode.REDIS_UNAVAILABLE
