"""The clients: :mod:`~voxqueue.client.direct` talks to Redis and Celery (a trusted machine),
:mod:`~voxqueue.client.gateway` to the device gateway over HTTP and a WebSocket (a device);
:func:`~voxqueue.client.gateway.connect_client` picks the one the settings ask for."""

from voxqueue.client.direct import Client, Turn
from voxqueue.client.errors import InputError, Unavailable

__all__ = ["Client", "InputError", "Turn", "Unavailable"]
