"""voxqueue: a distributed voice agent on Celery and Redis.

The public API::

    from voxqueue import Client
    with Client() as client:
        turn = client.ask("what time is it in Tokyo?", session="kitchen")
        result = turn.wait()
        print(result.reply)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from voxqueue.client import Client, InputError, Turn, Unavailable
    from voxqueue.contracts import TurnEvent, TurnResult
    from voxqueue.settings import MissingKeyError, Settings, get_settings

#: Where each public name lives: imported on first use (PEP 562), so that a process importing
#: ``voxqueue.settings`` alone (a worker, beat, the supervisor) loads neither the client nor
#: Celery, numpy and redis through it.
_HOME = {"Client": "voxqueue.client", "InputError": "voxqueue.client", "Turn": "voxqueue.client",
         "Unavailable": "voxqueue.client", "TurnEvent": "voxqueue.contracts",
         "TurnResult": "voxqueue.contracts", "MissingKeyError": "voxqueue.settings",
         "Settings": "voxqueue.settings", "get_settings": "voxqueue.settings"}


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module 'voxqueue' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOME[name]), name)


__all__ = [
    "Client",
    "InputError",
    "MissingKeyError",
    "Settings",
    "Turn",
    "TurnEvent",
    "TurnResult",
    "Unavailable",
    "get_settings",
]
__version__ = "0.1.0"
