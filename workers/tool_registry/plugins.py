"""Tools from installed packages: entry points in the group ``voxqueue.tools``.

An entry point names a module (its tools are loaded like ``VOXQUEUE_TOOL_MODULES``), a tool
function, or a list of tool functions::

    [project.entry-points."voxqueue.tools"]
    kitchen = "kitchen_tools"              # a module
    pantry = "kitchen_tools:pantry_count"  # one function
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

import structlog

from workers.tool_registry.registry import Tool, ToolRegistry

GROUP = "voxqueue.tools"

log = structlog.get_logger("voxqueue.tools")


def load_entry_points(registry: ToolRegistry, group: str = GROUP) -> list[Tool]:
    """Add the tools of every entry point in ``group``; a broken plugin is logged and skipped."""
    added: list[Tool] = []
    for ep in entry_points(group=group):
        try:
            added.extend(_add(registry, ep.load()))
        except Exception as exc:  # one bad plugin must not take the worker down
            log.warning(
                "tool plugin not loaded",
                entry_point=ep.name,
                value=ep.value,
                error=f"{exc.__class__.__name__}: {exc}",
            )
    return added


def _add(registry: ToolRegistry, obj: Any) -> list[Tool]:
    if inspect.ismodule(obj):
        return registry.load_module(obj.__name__)
    if isinstance(obj, list | tuple):
        return [registry.add(_callable(item)) for item in obj]
    return [registry.add(_callable(obj))]


def _callable(obj: Any) -> Callable[..., Any] | Tool:
    if isinstance(obj, Tool) or callable(obj):
        return obj
    raise TypeError(
        f"a voxqueue.tools entry point must name a module or a function, not {type(obj).__name__}"
    )
