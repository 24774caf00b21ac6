"""The tools catalogue: what a tools worker can run, published for the workers that cannot
list every source themselves (an agent learns the MCP servers' tools from it)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class ToolSpec(BaseModel):
    """One tool as the model is offered it: its OpenAI function schema and its flags."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")
    description: str = Field(max_length=4000)
    parameters: dict[str, Any]
    """The JSON schema of the arguments (the ``parameters`` of an OpenAI function tool)."""
    side_effects: bool = False
    reads_untrusted: bool = False


class ToolCatalogue(BaseModel):
    """The MCP servers' tools a tools worker listed, as it last listed them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    v: Literal[1] = 1
    tools: list[ToolSpec] = Field(max_length=512)
    published_at: float
    worker: str = Field(default="", max_length=256)
