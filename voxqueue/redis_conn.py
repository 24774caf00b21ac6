"""Redis connections from the settings' URL (auth and TLS come with the URL)."""

from __future__ import annotations

import redis

from voxqueue.settings import Settings


def connect(settings: Settings, *, decode: bool = False) -> redis.Redis:
    """A client with timeouts and keep-alive; it reconnects by itself after a restart."""
    return redis.Redis.from_url(
        settings.redis_url,
        decode_responses=decode,
        socket_timeout=10,
        socket_connect_timeout=5,
        socket_keepalive=True,
        health_check_interval=25,
        retry_on_timeout=True,
    )


def redact(url: str) -> str:
    """The URL with its password hidden, for messages and logs."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = f"{parts.username or ''}:***@{parts.hostname}"
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit(parts._replace(netloc=netloc))
