"""What a turn is: its identity, its input and its deadline."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class TurnSpec(BaseModel):
    """A turn as the client created it; stored in Redis beside the turn's events."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    v: Literal[1] = 1
    turn_id: str = Field(min_length=8, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")
    session_id: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.:-]+$")
    device: str | None = Field(default=None, max_length=128, pattern=r"^[A-Za-z0-9_.:-]+$")
    effects_allowed: tuple[str, ...] | None = Field(default=None, max_length=64)
    """The side-effecting tools this turn may run, when its client narrows them (the Wyoming
    server, for the peers on its network); None: every tool the workers offer. It only
    narrows: a name here never adds a tool."""
    input: Literal["text", "audio"]
    text: str | None = None
    audio_key: str | None = None
    """Claim check: the Redis key holding the utterance's 16 kHz mono PCM."""
    audio_stream: bool = False
    """The audio arrives on ``audio_key`` (a stream) while it is spoken; the STT job starts
    with the speech (``voxqueue.client.direct``)."""
    audio_seconds: float | None = None
    created_at: float
    """Wall clock (epoch seconds) when the client created the turn: the end of speech."""
    deadline: float
    """Wall clock after which every stage stops working on the turn."""
    speak: bool = True
    """Synthesize the reply; a text-only caller can turn it off."""
    until: Literal["reply", "transcript"] = "reply"
    """Where the turn ends: the agent's reply (spoken when ``speak``), or the transcript (speech
    to text only: the STT stage ends the turn, no agent, nothing spoken)."""
