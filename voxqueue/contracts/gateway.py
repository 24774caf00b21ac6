"""What devices and the gateway say to each other over HTTP (JSON bodies, version 1)."""

from __future__ import annotations

import base64
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from voxqueue.contracts.events import TurnEvent

#: A device's own session name (the gateway puts it in the device's namespace).
SESSION_PATTERN = r"^[A-Za-z0-9_.-]{1,64}$"


class TextTurnRequest(BaseModel):
    """``POST /v1/turns``: a turn from text."""

    model_config = ConfigDict(extra="forbid")

    v: Literal[1] = 1
    text: str = Field(min_length=1, max_length=100_000)
    """Checked against the server's own limit (``VOXQUEUE_MAX_TEXT_CHARS``)."""
    session: str | None = Field(default=None, pattern=SESSION_PATTERN)
    speak: bool = True
    deadline_s: float | None = Field(default=None, gt=0)


class TurnCreated(BaseModel):
    """The answer to a new turn: where to follow it."""

    v: Literal[1] = 1
    turn_id: str
    session_id: str
    deadline: float


class DeviceInfo(BaseModel):
    """``GET /v1/device``: the device a token belongs to."""

    v: Literal[1] = 1
    device: str


class WireEntry(BaseModel):
    """One entry of a turn's or a device's stream; PCM as base64."""

    id: str
    event: dict[str, Any]
    pcm: str | None = None

    @classmethod
    def of(cls, entry_id: str, event: TurnEvent | dict[str, Any], pcm: bytes | None) -> WireEntry:
        data = event.model_dump(mode="json") if isinstance(event, TurnEvent) else event
        return cls(id=entry_id, event=data,
                   pcm=base64.b64encode(pcm).decode() if pcm is not None else None)

    def pcm_bytes(self) -> bytes | None:
        return base64.b64decode(self.pcm) if self.pcm is not None else None


class Entries(BaseModel):
    """``GET …/events`` and ``GET /v1/announcements``: what came after ``after``."""

    v: Literal[1] = 1
    entries: list[WireEntry]
    last_id: str
    """Pass it back as ``after`` to go on from here (after a reconnection too)."""


class GatewayError(BaseModel):
    """Every refusal: a code the caller can act on and a message for people."""

    v: Literal[1] = 1
    code: str
    message: str
