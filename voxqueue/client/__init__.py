"""The clients: :mod:`~voxqueue.client.direct` talks to Redis and Celery (a trusted machine),
:mod:`~voxqueue.client.gateway` to the device gateway over HTTP and a WebSocket (a device);
:func:`~voxqueue.client.gateway.connect_client` picks the one the settings ask for."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from voxqueue.client.errors import InputError, Unavailable

if TYPE_CHECKING:
    from voxqueue.client.direct import Client, Turn


def __getattr__(name: str) -> Any:
    """``Client`` and ``Turn`` on first use (PEP 562): importing ``voxqueue.client.gateway``
    (a device) or ``voxqueue.client.errors`` loads neither Celery nor the direct client."""
    if name in ("Client", "Turn"):
        return getattr(importlib.import_module("voxqueue.client.direct"), name)
    raise AttributeError(f"module 'voxqueue.client' has no attribute {name!r}")


__all__ = ["Client", "InputError", "Turn", "Unavailable"]
