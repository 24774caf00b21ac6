"""Who is behind a request, for as long as the request lasts: a device's token is checked when
a request or socket opens and again every ``VOXQUEUE_GATEWAY_REVOCATION_CHECK_S`` while it
stays open (a long poll, a streamed capture), so a revoked device loses them within that."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
import redis.asyncio as aioredis

from voxqueue.gateway.devices import TOKEN_PREFIX, token_hash
from voxqueue.gateway.rules import Refused
from voxqueue.keys import Keys

T = TypeVar("T")


def bearer(authorization: str) -> str | None:
    """The token of an ``Authorization: Bearer …`` header, or None."""
    scheme, _, token = authorization.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token.startswith(TOKEN_PREFIX) or len(token) > 128:
        return None
    return token


class Access:
    """Checks that a device's token still holds, on the gateway's async Redis."""

    def __init__(self, r: aioredis.Redis, keys: Keys, every_s: float) -> None:
        self.r = r
        self.keys = keys
        self.every_s = every_s

    async def holds(self, device: str, token: str) -> bool:
        """Whether ``token`` is still ``device``'s (not revoked, not re-issued)."""
        name: Any = await self.r.hget(self.keys.device_tokens(), token_hash(token))
        return name is not None and (name.decode() if isinstance(name, bytes) else name) == device

    async def still(self, device: str, token: str) -> None:
        """:class:`Refused` (401) once the device's token was revoked."""
        if not await self.holds(device, token):
            raise Refused(401, "revoked", "this device's token was revoked")

    async def while_allowed(self, device: str, token: str, lifetime_s: float,
                            work: Callable[[], Awaitable[T]]) -> T:
        """``work()``, cut off when the token is revoked (401) or after ``lifetime_s`` (408)."""
        revoked = False
        try:
            async with anyio.create_task_group() as tg:
                async def watch() -> None:
                    nonlocal revoked
                    while await self.holds(device, token):
                        await anyio.sleep(self.every_s)
                    revoked = True
                    tg.cancel_scope.cancel()

                tg.start_soon(watch)
                try:
                    with anyio.move_on_after(lifetime_s) as lifetime:
                        return await work()
                finally:
                    tg.cancel_scope.cancel()
        except BaseExceptionGroup as group:  # the work's own error, as it was raised
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
            raise
        if revoked:
            raise Refused(401, "revoked", "this device's token was revoked")
        assert lifetime.cancelled_caught
        raise Refused(408, "too-long", f"a stream lasts at most {lifetime_s:g} s")
