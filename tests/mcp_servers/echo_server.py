"""A small MCP server over stdio for the tests (the official SDK's MCPServer, once FastMCP).

Run: ``python tests/mcp_servers/echo_server.py`` (stdio) or ``... --http PORT``.
Tools: ``echo``, ``add``, ``shout_fail``, ``slow``, and ``server_pid`` (read-only: it changes
nothing).
Every call is appended to the file named by ``ECHO_MCP_LOG`` when set, so tests can see
that the server (not something else) answered.
"""

from __future__ import annotations

import json
import os

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

server = MCPServer("echo")


def _log(name: str, arguments: dict[str, object]) -> None:
    path = os.environ.get("ECHO_MCP_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"tool": name, "arguments": arguments, "pid": os.getpid()}) + "\n")


@server.tool()
def echo(text: str, times: int = 1) -> str:
    """Repeat the text back, `times` times."""
    _log("echo", {"text": text, "times": times})
    return " ".join([f"echo: {text}"] * times)


@server.tool()
def add(a: float, b: float) -> float:
    """Add two numbers."""
    _log("add", {"a": a, "b": b})
    return a + b


@server.tool()
def shout_fail(reason: str) -> str:
    """Always fail with the reason."""
    _log("shout_fail", {"reason": reason})
    raise ToolError(f"refused: {reason}")


@server.tool()
async def slow(seconds: float) -> str:
    """Answer after some seconds."""
    _log("slow", {"seconds": seconds})
    await anyio.sleep(seconds)
    return "slept"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def server_pid() -> int:
    """The process id of this server."""
    _log("server_pid", {})
    return os.getpid()


if __name__ == "__main__":
    if os.environ.get("ECHO_MCP_STARTS"):  # who started a server, for the tests that count
        with open(os.environ["ECHO_MCP_STARTS"], "a", encoding="utf-8") as f:
            f.write(f"{os.getpid()}\n")
    import sys

    if len(sys.argv) == 3 and sys.argv[1] == "--http":  # streamable HTTP on 127.0.0.1:PORT/mcp
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
