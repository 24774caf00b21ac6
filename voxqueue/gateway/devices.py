"""Devices and their tokens: each device its own credential, stored hashed, revocable.

A token is 32 random bytes (URL-safe text); Redis keeps only its SHA-256, so a copy of Redis
gives no device's token. The gateway turns a presented token into the device's name.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
import time
from dataclasses import dataclass
from typing import Any

import redis

from voxqueue.keys import Keys

#: A device's name: what its turns, announcements and tools' state are keyed by.
NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
TOKEN_PREFIX = "vqd_"  # noqa: S105 (a prefix that tells a device token apart, no secret)


class DeviceError(ValueError):
    """A bad name, or a device that exists (add) or does not (revoke)."""


@dataclass(frozen=True)
class RegisteredDevice:
    name: str
    created_at: float
    last_seen: float | None = None


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class DeviceRegistry:
    """``vq:devices`` (name → JSON) and ``vq:device-tokens`` (token hash → name)."""

    def __init__(self, r: redis.Redis, keys: Keys) -> None:
        self.r = r
        self.keys = keys

    def add(self, name: str) -> str:
        """Register ``name`` and return its token (shown once; only its hash is kept)."""
        if not NAME.match(name):
            raise DeviceError(f"a device name is 1 to 64 of A-Z a-z 0-9 _ . - (got {name!r})")
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        record = json.dumps({"created_at": time.time(), "token_hash": token_hash(token)})
        if not self.r.hsetnx(self.keys.devices(), name, record):
            raise DeviceError(f"device {name!r} exists: revoke it first to issue a new token")
        self.r.hset(self.keys.device_tokens(), token_hash(token), name)
        return token

    def revoke(self, name: str) -> None:
        """Forget the device and its token: the gateway refuses it from the next request."""
        raw: Any = self.r.hget(self.keys.devices(), name)
        if raw is None:
            raise DeviceError(f"no device {name!r}")
        pipe = self.r.pipeline(transaction=True)
        pipe.hdel(self.keys.device_tokens(), json.loads(raw)["token_hash"])
        pipe.hdel(self.keys.devices(), name)
        pipe.execute()

    def list(self) -> list[RegisteredDevice]:
        raw: Any = self.r.hgetall(self.keys.devices())
        seen: Any = self.r.hgetall(self.keys.device_seen())
        out = []
        for name, record in sorted(raw.items()):
            key = name.decode() if isinstance(name, bytes) else name
            last = seen.get(name)
            out.append(RegisteredDevice(key, float(json.loads(record)["created_at"]),
                              float(last) if last is not None else None))
        return out

    def authenticate(self, token: str) -> str | None:
        """The name of the device holding ``token``, or None."""
        if not token.startswith(TOKEN_PREFIX) or len(token) > 128:
            return None
        digest = token_hash(token)
        name: Any = self.r.hget(self.keys.device_tokens(), digest)
        if name is None:
            return None
        device = name.decode() if isinstance(name, bytes) else str(name)
        record: Any = self.r.hget(self.keys.devices(), device)
        if record is None or not hmac.compare_digest(json.loads(record)["token_hash"], digest):
            return None
        return device

    def seen(self, name: str) -> None:
        self.r.hset(self.keys.device_seen(), name, repr(time.time()))
