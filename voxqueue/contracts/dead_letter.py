"""A queue item no worker could deliver, as the broker keeps it
(``voxqueue/broker/dead_letters.py``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict


class DeadLetter(BaseModel):
    """One item taken off a queue that was not a message kombu can deliver: not JSON, or JSON
    that is not a kombu message envelope. Kept whole, so that it can be read or pushed back."""

    model_config = ConfigDict(extra="forbid")

    v: Literal[1] = 1
    queue: str
    """The list it was taken from (a queue's name, with its priority suffix if any)."""
    at: float
    """Unix time of the take."""
    reason: str
    head: str
    """Its first bytes, escaped: what a log line or ``voxqueue doctor`` shows."""
    item: str | None = None
    """The whole item, when it is UTF-8 text."""
    item_b64: str | None = None
    """Else the whole item in base64."""
