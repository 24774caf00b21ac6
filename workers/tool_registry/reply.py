"""A tool's answer in two forms: the data the model reads, and a sentence for the ear."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ToolReply:
    """Return this from a tool whose result is not what a person would say.

    ``data`` is what the model sees in the ``role: tool`` message (ids, zones and units kept,
    e.g. to cancel a timer later); ``say`` is one short sentence for a listener ("Timer set for
    10 minutes."), which the offline agent speaks as is. A model writes its own reply from
    ``data``.
    """

    data: Any
    say: str
