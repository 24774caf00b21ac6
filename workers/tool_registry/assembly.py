"""The one place a worker's tools are assembled: built-ins, ``VOXQUEUE_TOOL_MODULES``, installed
plugins and MCP servers, filtered by ``VOXQUEUE_TOOLS_ALLOW`` / ``VOXQUEUE_TOOLS_DENY``.

Only the tools worker assembles in full: listing MCP servers starts their processes. Every
other worker assembles the rest (the sentences the intents need, the schemas) and learns the
MCP tools from the catalogue the tools worker published (``workers.tool_registry.catalogue``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import structlog

from voxqueue.settings import Settings
from workers.tool_registry.mcp_tools import mcp_tools
from workers.tool_registry.plugins import load_entry_points
from workers.tool_registry.registry import Tool, ToolRegistry

log = structlog.get_logger("voxqueue.tools")

BUILTIN_MODULES: tuple[str, ...] = (
    "workers.tools.builtin.time_tools",
    "workers.tools.builtin.math_tools",
    "workers.tools.builtin.timers",
    "workers.tools.builtin.memory",
    "workers.tools.builtin.weather",
    "workers.tools.builtin.knowledge",
    "workers.tools.builtin.web",
    "workers.tools.builtin.feeds",
    "workers.tools.builtin.home",
    "workers.tools.builtin.notify",
    "workers.tools.builtin.system",
    "workers.tools.builtin.chance",
    "workers.monitor.tools",
)


def assemble_tools(settings: Settings, *, mcp: bool = True, skip_broken: bool = False,
                   extra: Iterable[Tool] = (),
                   on_mcp_listed: Callable[[list[Tool]], None] | None = None) -> ToolRegistry:
    """The tools a worker with ``settings`` offers.

    ``mcp``: list the MCP servers' tools (starting stdio servers); ``extra``: tools known from
    elsewhere (the published catalogue) added where no assembled tool has their name;
    ``skip_broken``: log and skip a tool module that fails to import instead of raising;
    ``on_mcp_listed``: given the MCP tools once listed (the tools worker publishes them).
    """
    registry = ToolRegistry()
    for module in (*BUILTIN_MODULES, *settings.tools.module_names):
        try:
            registry.load_module(module)
        except Exception as exc:
            if not skip_broken:
                raise
            log.warning("tool module not loaded", module=module,
                        error=f"{exc.__class__.__name__}: {exc}")
    load_entry_points(registry)
    if mcp:
        listed = mcp_tools(settings, taken=set(registry.names))
        for mcp_tool in listed:
            mcp_tool.reads_untrusted = True  # a server's results are text the model must not obey
            registry.add(mcp_tool)
        if on_mcp_listed is not None:
            on_mcp_listed(listed)
    for known in extra:
        if registry.get(known.name) is None:
            registry.add(known)
    allow, deny = allowed_names(settings), denied_names(settings)
    return ToolRegistry(t for t in registry
                        if (not allow or t.name in allow) and t.name not in deny)


def allowed_names(settings: Settings) -> set[str]:
    """``VOXQUEUE_TOOLS_ALLOW``: when set, only these tools are offered."""
    return {n.strip() for n in settings.tools.allow.split(",") if n.strip()}


def denied_names(settings: Settings) -> set[str]:
    """``VOXQUEUE_TOOLS_DENY``: tools never offered."""
    return {n.strip() for n in settings.tools.deny.split(",") if n.strip()}
