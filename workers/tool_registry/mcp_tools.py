"""Tools of MCP servers (``VOXQUEUE_MCP_SERVERS``), offered to the model like built-ins.

Each server's tools are listed once when a worker builds its registry; the schema the model sees is
the MCP tool's own ``inputSchema``. Calls go through a session per server that the worker process
keeps open (``workers.tool_registry.mcp_sessions``): a stdio server is started once, not once per
call. Uses the official ``mcp`` SDK (2.x ``mcp.Client``).
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from functools import partial
from typing import Any

import structlog
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model, model_validator

from voxqueue.observability.redaction import redact_text
from voxqueue.settings import Settings
from workers.tool_registry.egress import check_model_urls
from workers.tool_registry.mcp_sessions import McpSessions
from workers.tool_registry.registry import Tool

log = structlog.get_logger("voxqueue.tools")

LIST_TIMEOUT_S = 20.0
_JSON_TYPES: dict[str, Any] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "array": list[Any],
    "object": dict[str, Any],
    "null": type(None),
}


class McpServer(BaseModel):
    """One entry of ``VOXQUEUE_MCP_SERVERS``: a stdio command or a streamable HTTP URL."""

    model_config = ConfigDict(extra="forbid")

    name: str
    command: list[str] | None = None
    """argv of a stdio server, e.g. ``["uvx", "mcp-server-fetch"]``."""
    env: dict[str, str] | None = None
    """Extra environment of a stdio server (it inherits only PATH, HOME and the like)."""
    cwd: str | None = None
    url: str | None = None
    """Endpoint of a streamable HTTP server, e.g. ``http://127.0.0.1:8000/mcp``."""
    headers: dict[str, str] | None = None
    """HTTP headers for a URL server, e.g. ``{"Authorization": "Bearer ..."}``."""
    timeout_s: float | None = None
    """Per-call limit of this server's tools (default: ``VOXQUEUE_TOOL_TIMEOUT_S``)."""
    prefix: bool = False
    """Name this server's tools ``<name>_<tool>`` (always done on a name clash)."""

    @model_validator(mode="after")
    def _one_transport(self) -> McpServer:
        if bool(self.command) == bool(self.url):
            raise ValueError(
                f"MCP server {self.name!r}: give exactly one of 'command' (stdio) "
                "or 'url' (streamable HTTP)"
            )
        return self


def _client(server: McpServer, read_timeout_s: float) -> Any:
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    if server.command:
        params = StdioServerParameters(
            command=server.command[0], args=server.command[1:], env=server.env, cwd=server.cwd
        )
        errlog = sys.__stderr__ or sys.stderr
        return Client(
            stdio_client(params, errlog=errlog),
            read_timeout_seconds=read_timeout_s,
        )
    assert server.url is not None
    if server.headers:
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        http = httpx2.AsyncClient(headers=server.headers, timeout=read_timeout_s)
        return Client(
            streamable_http_client(server.url, http_client=http),
            read_timeout_seconds=read_timeout_s,
        )
    return Client(server.url, read_timeout_seconds=read_timeout_s)


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside (nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


async def _all_tools(client: Any) -> list[Any]:
    tools: list[Any] = []
    cursor: str | None = None
    for _page in range(100):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


async def call_tool(
    server: McpServer,
    name: str,
    arguments: dict[str, Any],
    timeout_s: float,
    sessions: McpSessions,
    read_only: bool = False,
) -> str:
    """Call one tool in the server's kept session; the text of its result, or an error raised."""
    try:
        future = sessions.submit(
            server.name,
            partial(_client, server, timeout_s),
            name,
            arguments,
            timeout_s,
            retry=read_only,
        )
        result = await asyncio.wrap_future(future)
    except TimeoutError:
        raise TimeoutError(
            f"MCP server {server.name!r} did not answer within {timeout_s:g} s"
        ) from None
    except BaseException as exc:
        leaf = _leaf(exc)
        if leaf is exc and not isinstance(exc, Exception):
            raise
        raise RuntimeError(
            f"MCP server {server.name!r}: {leaf.__class__.__name__}: {leaf}"
        ) from None
    text = render_result(result)
    if result.is_error:
        raise RuntimeError(text or f"the MCP tool {name} failed")
    return text


def render_result(result: Any) -> str:
    """Text of a ``CallToolResult``: its text blocks, else its structured content."""
    parts: list[str] = []
    for block in result.content or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind == "resource_link":
            parts.append(f"[resource {getattr(block, 'uri', '')}]")
        elif kind == "resource":
            inner = getattr(block, "resource", None)
            parts.append(getattr(inner, "text", None) or f"[resource {getattr(inner, 'uri', '')}]")
        else:
            parts.append(f"[{kind or 'content'} omitted]")
    if not parts and result.structured_content is not None:
        return json.dumps(result.structured_content, ensure_ascii=False, default=str)
    return "\n".join(parts)


def args_model(name: str, schema: dict[str, Any]) -> tuple[type[BaseModel], dict[str, str]]:
    """A pydantic model for a JSON schema's top-level properties, and field -> argument name.

    Fields are ``a0, a1, ...`` with the real names as aliases, so any property name works.
    """
    properties = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    fields: dict[str, Any] = {}
    names: dict[str, str] = {}
    for index, (prop, spec) in enumerate(properties.items()):
        field = f"a{index}"
        names[field] = prop
        kind = _python_type(spec if isinstance(spec, dict) else {})
        if prop in required:
            fields[field] = (kind, Field(..., alias=prop))
        else:
            fields[field] = (kind | None, Field(None, alias=prop))
    model = create_model(
        f"{re.sub(r'[^0-9A-Za-z_]', '_', name)}_args",
        __config__=ConfigDict(extra="forbid"),
        **fields,
    )
    return model, names


def _python_type(spec: dict[str, Any]) -> Any:
    kind = spec.get("type")
    if isinstance(kind, list):
        chosen = [_JSON_TYPES[k] for k in kind if k in _JSON_TYPES]
        if not chosen:
            return Any
        union = chosen[0]
        for extra in chosen[1:]:
            union = union | extra
        return union
    return _JSON_TYPES.get(kind, Any) if isinstance(kind, str) else Any


def make_tool(
    server: McpServer,
    mcp_tool: Any,
    name: str,
    default_timeout_s: float,
    sessions: McpSessions,
) -> Tool:
    """A registry Tool that calls ``mcp_tool`` on ``server`` through ``sessions``."""
    schema = dict(mcp_tool.input_schema or {})
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    model, names = args_model(name, schema)
    required = set(schema.get("required") or [])
    remote = mcp_tool.name
    limit = server.timeout_s or default_timeout_s

    async def call(**kwargs: Any) -> str:
        arguments = {
            names[f]: v for f, v in kwargs.items() if not (v is None and names[f] not in required)
        }
        check_model_urls(arguments)  # a server may open them: after a page, only known URLs
        return await call_tool(server, remote, arguments, limit, sessions, read_only)

    annotations = getattr(mcp_tool, "annotations", None)
    read_only = bool(annotations and annotations.read_only_hint)
    description = (
        mcp_tool.description or getattr(mcp_tool, "title", None) or remote.replace("_", " ")
    )[:1024]
    tool = Tool(
        name=name,
        description=description,
        fn=call,
        args_model=model,
        timeout_s=limit,
        side_effects=not read_only,
    )
    tool.schema = {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": schema},
    }
    return tool


def _tool_name(server: McpServer, remote: str, taken: set[str]) -> str:
    clean = re.sub(r"[^0-9A-Za-z_-]", "_", remote)[:64]
    if server.prefix or clean in taken:
        clean = re.sub(r"[^0-9A-Za-z_-]", "_", f"{server.name}_{remote}")[:64]
    return clean


def servers(settings: Settings) -> list[McpServer]:
    """The configured servers; an invalid entry is logged (by name and problem: its headers
    and environment may hold tokens) and skipped."""
    found = []
    for entry in settings.tools.mcp_servers:
        try:
            found.append(McpServer.model_validate(entry))
        except ValueError as exc:
            log.warning(
                "MCP server entry ignored", server=str(entry.get("name", "?")), error=_problem(exc)
            )
    return found


def _problem(exc: ValueError) -> str:
    """What is wrong with an entry, without the values it was given."""
    if isinstance(exc, ValidationError):
        return "; ".join(
            f"{'.'.join(str(part) for part in e['loc']) or 'entry'}: {e['msg']}"
            for e in exc.errors(include_input=False, include_url=False, include_context=False)
        )
    return redact_text(str(exc))


def mcp_tools(settings: Settings, taken: set[str] | None = None) -> list[Tool]:
    """Tools of every configured MCP server; a server that cannot be listed is skipped.

    The tools share one set of kept sessions, owned by the registry they go into.
    """
    used = set(taken or ())
    tools: list[Tool] = []
    sessions = McpSessions()
    for server in servers(settings):
        try:  # listed in the session that the calls will use: it is open before the first call
            limit = server.timeout_s or settings.tools.timeout_s
            listed = sessions.run(
                server.name, partial(_client, server, limit), _all_tools, LIST_TIMEOUT_S
            )
        except BaseException as exc:
            if not isinstance(exc, Exception) and not isinstance(exc, BaseExceptionGroup):
                raise
            leaf = _leaf(exc)
            log.warning(
                "MCP server not listed; its tools are not offered",
                server=server.name,
                error=redact_text(f"{leaf.__class__.__name__}: {leaf}"),
            )
            continue
        for mcp_tool in listed:
            name = _tool_name(server, mcp_tool.name, used)
            tools.append(make_tool(server, mcp_tool, name, settings.tools.timeout_s, sessions))
            used.add(name)
        log.info("MCP tools listed", server=server.name, tools=[t.name for t in tools])
    return tools
