"""The arguments of each Celery task, one model per task family.

Tasks take and return plain JSON (``model_dump(mode="json")``); the worker validates on receipt.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Job(BaseModel):
    model_config = ConfigDict(extra="forbid")

    v: Literal[1] = 1
    turn_id: str
    enqueued_at: float = 0.0
    """Wall clock when the job was sent: the start event reports the queue hop from it."""

    def describe(self) -> str:
        """A short, secret-free summary for dashboards (Flower shows it as the arguments)."""
        return f"turn={self.turn_id[:12]}"

    def task_id(self) -> str:
        """The Celery task id: the same for every copy of this job, so a job sent twice (by a
        stage that died after sending) is one job, counted and fenced as one."""
        raise NotImplementedError


class SttJob(_Job):
    """Transcribe the turn's audio (found through the turn's claim check)."""

    def task_id(self) -> str:
        return f"{self.turn_id}.stt"


class AgentStep(_Job):
    """Run step ``step`` of the turn's agent loop (1-based)."""

    step: int = Field(ge=1)

    def describe(self) -> str:
        return f"{super().describe()} step={self.step}"

    def task_id(self) -> str:
        return f"{self.turn_id}.agent.{self.step}"


class ToolCallJob(_Job):
    """One tool call of one LLM answer (v2: the calls join without Celery's chord)."""

    v: Literal[2] = 2  # type: ignore[assignment]
    step: int = Field(ge=1)
    call_id: str = Field(min_length=1, max_length=256)
    name: str = Field(max_length=256)
    arguments: str = Field(max_length=200_000)
    """The raw JSON text the model produced: validated by the tool, not here."""
    calls: int = Field(ge=1, le=1000)
    """How many calls of the answer run (this one included): the join waits for that many
    outcomes before the next step is sent."""
    session_id: str = ""
    device: str | None = None

    def describe(self) -> str:
        return f"{super().describe()} step={self.step} tool={self.name[:40]}"

    def task_id(self) -> str:
        return f"{self.turn_id}.tool.{self.step}.{self.call_id}"


class ToolOutcome(BaseModel):
    """What a tool call gave: a result or an error the model can act on. Never raised."""

    model_config = ConfigDict(extra="forbid")

    v: Literal[1] = 1
    call_id: str
    name: str
    arguments: dict[str, Any] | str
    ok: bool
    content: str
    """The text the model sees in the ``role: tool`` message."""
    say: str | None = Field(default=None, max_length=2000)
    """The tool's own sentence for the ear, if it gave one (``ToolReply``)."""
    error_code: str | None = None
    started_at: float
    ms: float


class TtsJob(_Job):
    """Synthesize one sentence of the reply; ``seq`` orders sentences on the stream."""

    seq: int = Field(ge=0)
    text: str = Field(min_length=1, max_length=20_000)
    #: The sentence spoken just before this one, for a provider that carries prosody across.
    previous_text: str | None = Field(default=None, max_length=20_000)

    def describe(self) -> str:
        return f"{super().describe()} seq={self.seq} chars={len(self.text)}"

    def task_id(self) -> str:
        return f"{self.turn_id}.tts.{self.seq}"
