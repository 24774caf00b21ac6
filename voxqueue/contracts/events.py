"""Turn events: every stage appends these to the turn's Redis Stream, in the style of
Home Assistant's Assist pipeline. Every turn ends with ``run-end``."""

from __future__ import annotations

import time
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

EventType = Literal[
    "run-start",
    "stt-start",
    "stt-partial",
    "stt-end",
    "agent-step",
    "llm-start",
    "llm-end",
    "tool-start",
    "tool-end",
    "reply",
    "tts-start",
    "tts-chunk",
    "tts-end",
    "cancelled",
    "error",
    "context-summarized",
    "alert",
    "run-end",
]
EVENT_TYPES: tuple[str, ...] = EventType.__args__  # type: ignore[attr-defined]


class ErrorCode(StrEnum):
    """Stable codes in ``error`` events, named after the stage that failed."""

    INVALID_INPUT = "invalid-input"
    AUDIO_INVALID = "audio-invalid"
    AUDIO_MISSING = "audio-missing"
    AUDIO_STREAM_STOPPED = "audio-stream-stopped"
    STT_NO_TEXT = "stt-no-text-recognized"
    STT_FAILED = "stt-failed"
    LLM_FAILED = "llm-failed"
    LLM_STEP_CAP = "agent-step-cap"
    TTS_FAILED = "tts-failed"
    MISSING_KEY = "missing-key"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"
    REDELIVERY_CAP = "redelivery-cap"
    REDIS_UNAVAILABLE = "redis-unavailable"
    INTERNAL = "internal-error"


class TurnEvent(BaseModel):
    """One timestamped event of a turn."""

    model_config = ConfigDict(extra="forbid")

    v: Literal[1] = 1
    type: EventType
    turn_id: str
    ts: float = Field(default_factory=time.time)
    """Wall clock (epoch seconds) when the event was written."""
    data: dict[str, Any] = Field(default_factory=dict)
