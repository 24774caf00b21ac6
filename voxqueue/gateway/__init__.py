"""The device gateway: the server side (``app``, needs the ``gateway`` extra) and the device side
(``remote``, plain HTTP), kept apart so a device installs no server."""
