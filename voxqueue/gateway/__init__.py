"""The device gateway's server (``app``, needs the ``gateway`` extra). Its client, a device's
side, is :mod:`voxqueue.client.gateway` (plain HTTP and a WebSocket): a device installs no
server."""
