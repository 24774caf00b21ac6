"""``voxqueue tools``: the tools a worker with these settings would offer."""

from __future__ import annotations

import json
from typing import Any

from voxqueue.settings import Settings, get_settings
from workers.tool_registry.assembly import allowed_names, assemble_tools, denied_names
from workers.tool_registry.registry import Tool, ToolRegistry


def describe_parameters(tool: Tool) -> str:
    """ "name: type*" per parameter, * marking the required ones."""
    params = tool.schema["function"]["parameters"]
    required = set(params.get("required") or [])
    parts = []
    for name, spec in (params.get("properties") or {}).items():
        parts.append(f"{name}: {_type_of(spec)}{'*' if name in required else ''}")
    return ", ".join(parts) or "-"


def _type_of(spec: dict[str, Any]) -> str:
    if "type" in spec:
        kind = spec["type"]
        return "|".join(kind) if isinstance(kind, list) else str(kind)
    options = spec.get("anyOf") or spec.get("oneOf") or []
    kinds = [str(o.get("type", "any")) for o in options if o.get("type") != "null"]
    return "|".join(kinds) or "any"


def print_tools(
    as_json: bool, settings: Settings | None = None, registry: ToolRegistry | None = None
) -> None:
    """Print the tools as a table (name, side effects, description, parameters) or as the JSON
    list of the schemas the model is given."""
    tools = registry if registry is not None else assemble_tools(settings or get_settings())
    if as_json:
        print(json.dumps(tools.schemas(), indent=2, ensure_ascii=False))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{len(tools)} tools", show_lines=False)
    table.add_column("name", style="bold")
    table.add_column("side effects")
    table.add_column("description")
    table.add_column("parameters (* required)")
    for tool in tools:
        table.add_row(
            tool.name,
            "yes" if tool.side_effects else "",
            tool.description,
            describe_parameters(tool),
        )
    Console().print(table)


def offered_tool_names(settings: Settings) -> frozenset[str]:
    """Names of the tools workers with ``settings`` offer, known without starting anything:
    with ``VOXQUEUE_TOOLS_ALLOW``, those; else the built-ins, ``VOXQUEUE_TOOL_MODULES`` and
    plugins (MCP servers' tools are not listed). Less ``VOXQUEUE_TOOLS_DENY``."""
    allow, deny = allowed_names(settings), denied_names(settings)
    if allow:
        return frozenset(allow - deny)
    return frozenset(assemble_tools(settings, mcp=False, skip_broken=True).names)
