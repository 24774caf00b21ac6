"""The client a process should use, under its documented name: ``voxqueue.connect.connect_client``
(through the gateway when one is configured, else Redis). Both clients live in
:mod:`voxqueue.client`."""

from voxqueue.client.gateway import AnyClient, connect_client

__all__ = ["AnyClient", "connect_client"]
