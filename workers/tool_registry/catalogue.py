"""The MCP servers' tools, as the tools worker listed them, for the workers that do not start
MCP servers: the tools worker publishes them in Redis; an agent offers them to the model.

Only their schemas travel: the calls still run on the tools worker, which holds the sessions.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import redis
import structlog
from pydantic import ConfigDict, ValidationError, create_model

from voxqueue.contracts.tools import ToolCatalogue, ToolSpec
from voxqueue.keys import Keys
from workers.tool_registry.registry import Tool, ToolRegistry

log = structlog.get_logger("voxqueue.tools")

#: How often a worker looks for a newer catalogue, in seconds.
REFRESH_S = 10.0

_AnyArguments = create_model("catalogued_args", __config__=ConfigDict(extra="allow"))


def publish(r: redis.Redis, keys: Keys, tools: Iterable[Tool], worker: str = "") -> None:
    """Publish ``tools`` (the MCP servers' tools this worker listed) for the other workers."""
    specs = [ToolSpec(name=t.name, description=t.description[:4000],
                      parameters=t.schema["function"]["parameters"],
                      side_effects=t.side_effects, reads_untrusted=t.reads_untrusted)
             for t in tools]
    catalogue = ToolCatalogue(tools=specs, published_at=time.time(), worker=worker)
    r.set(keys.tool_catalogue(), catalogue.model_dump_json())


def _runs_on_the_tools_worker(**_: Any) -> str:
    raise RuntimeError("this tool runs on the tools worker")


def as_tool(spec: ToolSpec) -> Tool:
    """A tool known by its schema only (offered to the model; run by the tools worker)."""
    known = Tool(name=spec.name, description=spec.description, fn=_runs_on_the_tools_worker,
                 args_model=_AnyArguments, side_effects=spec.side_effects,
                 reads_untrusted=spec.reads_untrusted)
    known.schema = {"type": "function", "function": {
        "name": spec.name, "description": spec.description, "parameters": spec.parameters}}
    return known


def read(raw: bytes | None) -> list[Tool]:
    """The published tools (none when nothing was published or it cannot be read)."""
    if raw is None:
        return []
    try:
        return [as_tool(spec) for spec in ToolCatalogue.model_validate_json(raw).tools]
    except ValidationError as exc:
        log.warning("the tools catalogue cannot be read; MCP tools not offered", error=str(exc))
        return []


class CatalogueView:
    """A worker's tools: its own assembly plus the published catalogue.

    Until a catalogue is published, each use looks for it (one GET); after, every
    ``REFRESH_S``, rebuilding the tools only when it changed. A catalogue that vanished (Redis
    restarted empty) leaves the last one in use until a tools worker publishes again.
    """

    def __init__(self, r: redis.Redis, keys: Keys,
                 assemble: Callable[[list[Tool]], ToolRegistry]) -> None:
        self._r = r
        self._keys = keys
        self._assemble = assemble
        self._lock = threading.Lock()
        self._raw: bytes | None = None
        self._registry: ToolRegistry | None = None
        self._checked = 0.0

    def registry(self) -> ToolRegistry:
        with self._lock:
            now = time.monotonic()
            if self._registry is not None and self._raw is not None \
                    and now - self._checked < REFRESH_S:
                return self._registry
            self._checked = now
            try:
                raw: Any = self._r.get(self._keys.tool_catalogue())
            except redis.RedisError as exc:  # keep what we have; the step goes on
                log.warning("tools catalogue not read", error=str(exc))
                raw = None
            if raw is None and self._registry is not None:
                return self._registry
            if self._registry is None or raw != self._raw:
                self._registry = self._assemble(read(raw))
                self._raw = raw
            return self._registry
