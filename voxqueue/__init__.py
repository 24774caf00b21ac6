"""voxqueue: a distributed voice agent on Celery and Redis.

The public API::

    from voxqueue import Client
    with Client() as client:
        turn = client.ask("what time is it in Tokyo?", session="kitchen")
        result = turn.wait()
        print(result.reply)
"""

from voxqueue.client import Client, InputError, Turn, Unavailable
from voxqueue.contracts import TurnEvent, TurnResult
from voxqueue.settings import MissingKeyError, Settings, get_settings

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
