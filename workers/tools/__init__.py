"""The ``tools`` queue: tools are plain typed functions; their calls run in parallel.

``tool`` (optional decorator) and ``current_call`` are the API for people writing tools.
"""

from workers.tool_registry.context import ToolCall, current_call
from workers.tool_registry.registry import Tool, ToolRegistry, tool

__all__ = ["Tool", "ToolCall", "ToolRegistry", "current_call", "tool"]
