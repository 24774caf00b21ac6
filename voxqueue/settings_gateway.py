"""The device gateway's settings (``voxqueue gateway`` and a device's side of it), read from the
environment as ``VOXQUEUE_GATEWAY_*`` (and ``VOXQUEUE_DEVICE_TOKEN``); one group of
:class:`voxqueue.settings.Settings`, and what the gateway's process loads besides Redis and the
turns' limits (:class:`voxqueue.settings.ClientSettings`).

A device holds one token; the gateway's limits are per device (budgets per minute and per hour,
connections in flight) and per connection (headers, body, idle, lifetime), so one device or
one anonymous client cannot use up what the others need.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class GatewaySettings(BaseSettings):
    """The gateway's part of the settings (``settings.gateway``)."""

    model_config = SettingsConfigDict(
        env_prefix="VOXQUEUE_GATEWAY_", env_file=".env", extra="ignore", populate_by_name=True
    )

    # -- a device's side ---------------------------------------------------------------------
    url: str | None = None
    """Where a device reaches the server (``https://host:8765``); unset: straight to Redis, for
    a trusted single machine."""
    device_token: SecretStr | None = Field(default=None, validation_alias="VOXQUEUE_DEVICE_TOKEN")
    """The device's own token (``voxqueue devices add NAME``), sent to the gateway."""
    ca_file: Path | None = None
    """The CA certificates (PEM) a device trusts for the gateway's certificate: a private CA or
    a self-signed certificate. Unset: the system's."""
    allow_http: bool = False
    """Let a device send its token over plain ``http://`` to a host that is not loopback (a
    trusted network only); off, such a URL is refused: use ``https://``."""

    # -- the server ----------------------------------------------------------------------------
    host: str = "127.0.0.1"
    port: int = 8765
    public_url: str | None = None
    """The gateway's address as a phone or laptop reaches it (``https://voice.home.lan``): the
    browser page's link that ``voxqueue devices add NAME --link`` prints. Unset:
    ``http://<host>:<port>``."""
    turns_per_minute: int = Field(default=30, ge=1)
    """Turns (and cancels, and streams opened) one device may start per minute; more get 429
    with Retry-After."""
    turns_per_hour: int = Field(default=600, ge=1)
    speak_chars_per_minute: int = Field(default=4000, ge=1)
    """Characters one device may have read aloud per minute: ``/v1/speak``'s texts and its turns'
    replies (each spoken turn holds ``VOXQUEUE_REPLY_MAX_CHARS`` of them until its reply is
    recorded). The synthesis's CPU or bill, and the reply audio stored, follow them."""
    speak_chars_per_hour: int = Field(default=40_000, ge=1)
    audio_seconds_per_minute: float = Field(default=300.0, gt=0)
    """Seconds of speech one device may send per minute (every path: upload, stream)."""
    audio_seconds_per_hour: float = Field(default=3600.0, gt=0)
    sockets_per_device: int = Field(default=2, ge=1)
    """Streamed captures (WebSockets) one device may have open at once."""
    polls_per_device: int = Field(default=4, ge=1)
    """Long polls (a turn's events, announcements) one device may have waiting at once."""
    stream_max_frames: int = Field(default=8000, ge=1)
    """Frames one streamed capture may send (80 s of 10 ms frames)."""
    stream_grace_s: float = Field(default=10.0, gt=0)
    """A streamed capture's socket lives at most ``VOXQUEUE_MAX_AUDIO_SECONDS`` plus this."""
    ws_max_frame_bytes: int = Field(default=64 * 1024, ge=1024)
    """The largest WebSocket message the gateway reads (uvicorn's ``ws_max_size``)."""
    redis_pool: int = Field(default=200, ge=8)
    """Redis connections the gateway's long polls and reads share (waited for, never over)."""
    header_timeout_s: float = Field(default=10.0, gt=0)
    """A connection that has not sent a whole request head in this long is closed (slowloris)."""
    body_timeout_s: float = Field(default=30.0, gt=0)
    """A request body not received in this long is refused (408)."""
    idle_timeout_s: int = Field(default=5, ge=1)
    """An idle kept-alive connection is closed after this (uvicorn's ``timeout_keep_alive``)."""
    max_connections: int = Field(default=1000, ge=1)
    """Connections the gateway serves at once; more are answered 503 (uvicorn's
    ``limit_concurrency``)."""
    revocation_check_s: float = Field(default=0.5, gt=0, le=1.0)
    """How often an open long poll or WebSocket checks that its device's token still holds:
    a revoked device's connections close within this."""
    reply_ttl_s: int = Field(default=300, ge=10)
    """How long a device's turn (its events) stays once the device has read its end; the reply
    audio it read is deleted as soon as it asks for what follows."""
