"""The client a process should use: through the gateway when one is configured, else Redis."""

from __future__ import annotations

from voxqueue.client import Client
from voxqueue.gateway.remote import GatewayClient
from voxqueue.settings import ClientSettings, get_client_settings

#: Either client: the same API (ask, say, speak, ping, close; turns with events and playback).
AnyClient = Client | GatewayClient


def connect_client(settings: ClientSettings | None = None) -> AnyClient:
    """``GatewayClient`` when ``VOXQUEUE_GATEWAY_URL`` is set (a device: no Redis, its own
    token), else ``Client`` straight to Redis (a trusted single machine)."""
    chosen = settings or get_client_settings()
    return GatewayClient(chosen) if chosen.gateway.url else Client(chosen)
