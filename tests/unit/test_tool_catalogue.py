"""The MCP tools' catalogue: published by the tools worker, read by the others, who start no
MCP server yet offer the model the same tools."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator

import pytest
import redis

from tests.unit.test_tools_registry import ECHO_SERVER
from voxqueue.keys import Keys
from voxqueue.settings import RedisSettings, Settings, ToolSettings
from workers.tool_registry import catalogue
from workers.tool_registry.assembly import assemble_tools
from workers.tool_registry.registry import Tool, ToolRegistry
from workers.wiring import runtime_for


@pytest.fixture
def r(redis_server) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_server.url.rsplit("/", 1)[0] + "/3")
    yield client
    client.close()


@pytest.fixture
def keys() -> Keys:
    return Keys(f"vqc-{uuid.uuid4().hex[:8]}")


def shout(text: str, times: int = 1) -> str:
    """Say it louder.

    Args:
        text: what to say
    """
    return text.upper() * times


def test_a_published_tool_is_offered_with_its_schema_and_flags(r, keys):
    source = Tool.from_function(shout)
    source.reads_untrusted = True
    catalogue.publish(r, keys, [source], worker="tools@here")
    (known,) = catalogue.read(r.get(keys.tool_catalogue()))
    assert known.schema == source.schema
    assert known.reads_untrusted and not known.side_effects
    with pytest.raises(RuntimeError, match="tools worker"):
        known.fn(text="x")


def test_a_worker_sees_the_catalogue_once_published_and_keeps_it_when_redis_loses_it(r, keys):
    built: list[list[str]] = []

    def assemble(known: list[Tool]) -> ToolRegistry:
        built.append([t.name for t in known])
        return ToolRegistry(known)

    view = catalogue.CatalogueView(r, keys, assemble)
    assert view.registry().names == []  # nothing published yet
    assert view.registry().names == []  # looked again, nothing new: not rebuilt
    catalogue.publish(r, keys, [Tool.from_function(shout)])
    assert view.registry().names == ["shout"]  # found at the next use
    r.delete(keys.tool_catalogue())  # Redis restarted empty
    view._checked = 0.0  # the refresh interval passed
    assert view.registry().names == ["shout"]
    assert built == [[], ["shout"]]


def test_an_unreadable_catalogue_offers_no_extra_tool(r, keys):
    r.set(keys.tool_catalogue(), b'{"v": 99, "tools": []}')
    assert catalogue.read(r.get(keys.tool_catalogue())) == []


def test_only_the_tools_worker_starts_mcp_servers_the_agent_offers_their_tools(
        redis_server, tmp_path):
    """The agent's registry holds the MCP tool from the catalogue without having listed it."""
    url = redis_server.url.rsplit("/", 1)[0] + "/3"
    starts = tmp_path / "starts"
    server = {"name": "echo", "command": [sys.executable, ECHO_SERVER],
              "env": {"ECHO_MCP_STARTS": str(starts)}}
    settings = Settings(
        redis=RedisSettings(url=url, key_prefix=f"vqc-{uuid.uuid4().hex[:8]}"),
        tools=ToolSettings(mcp_servers=[server]))
    agent = runtime_for(settings)
    agent.queues = frozenset({"agent"})
    tools = runtime_for(settings)
    tools.queues = frozenset({"tools"})
    try:
        assert agent.tools.get("echo") is None  # no tools worker has listed it yet
        assert not starts.exists()  # and the agent started no server
        assert "echo" in tools.tools.names  # lists the server, publishes the catalogue
        assert len(starts.read_text().split()) == 1
        offered = agent.tools.get("echo")
        assert offered is not None and offered.reads_untrusted
        assert offered.schema == tools.tools.get("echo").schema  # type: ignore[union-attr]
        assert "get_weather" in agent.tools.names  # its own tools too
        assert assemble_tools(settings, mcp=False).get("echo") is None
        assert len(starts.read_text().split()) == 1  # still only the tools worker's
    finally:
        agent.redis.delete(agent.keys.tool_catalogue())
