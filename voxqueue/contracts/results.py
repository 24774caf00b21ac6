"""What a caller gets back from a finished turn."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field


class ToolCallRecord(BaseModel):
    name: str
    arguments: dict[str, Any] | str
    result: str | None = None
    error: str | None = None
    ms: float


class TurnResult(BaseModel):
    """A finished turn, assembled from its events (the CLI's ``--json`` output)."""

    turn_id: str
    session_id: str
    transcript: str | None = None
    reply: str | None = None
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    """In the order the model asked for them."""
    timings: dict[str, float] = Field(default_factory=dict)
    """Milliseconds per stage, and ``total`` from the end of speech to run-end."""
    audio_path: str | None = None
    status: Literal["ok", "error", "cancelled", "timeout"]
    error: dict[str, str] | None = None
