"""A side effect waiting for the person's yes: written by the agent when the system asks the
question, taken by the session's next turn, read by the tools worker that runs it."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class PendingAction(BaseModel):
    """The one action a question asked about, exactly as the model called it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    v: Literal[1] = 1
    turn_id: str = Field(min_length=1, max_length=256)
    """The turn that asked the question (its end, ``ok``, means the question was played)."""
    session_id: str = Field(max_length=512)
    device: str = Field(default="", max_length=256)
    """The device that heard the question ("" for none): only its next turn can say yes."""
    call_id: str = Field(min_length=1, max_length=256)
    """The model's call when parked; in the confirming turn, the system's own call."""
    name: str = Field(min_length=1, max_length=256)
    arguments: str = Field(max_length=200_000)
    """The raw JSON text of the call, run again verbatim."""
    question: str = Field(max_length=2000)
    asked_at: float
    """When the question was put: a yes counts only from a turn begun after it."""
    expires: float
