"""Secrets never reach a log line: the structlog processor, and the MCP settings' warnings."""

from __future__ import annotations

import io
import json

import pytest
import structlog
from structlog.testing import capture_logs

from tests.conftest import free_port
from voxqueue.observability.redaction import (
    MASK,
    is_secret_name,
    redact_event,
    redact_text,
    redact_url,
)
from voxqueue.settings import Settings, ToolSettings
from workers.tool_registry.mcp_tools import mcp_tools, servers

SECRET = "s3cr3t-VALUE-9f8e7d"


@pytest.mark.parametrize(
    "name",
    ["Authorization", "proxy-authorization", "Cookie", "Set-Cookie", "X-Api-Key", "api_key",
     "OPENAI_API_KEY", "home_assistant_token", "FLOWER_BASIC_AUTH", "flower_password",
     "client_secret", "X-Auth-Token", "credentials"],
)
def test_credential_names(name):
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name", ["Accept", "Content-Type", "max_tokens", "prompt_tokens", "session_id", "turn_id",
             "keep-alive", "key", "url", "device"],
)
def test_ordinary_names(name):
    assert not is_secret_name(name)


def test_urls_lose_passwords_and_query_values():
    assert redact_url(f"redis://:{SECRET}@redis:6379/0") == f"redis://:{MASK}@redis:6379/0"
    assert redact_url(f"https://ada:{SECRET}@h/p") == f"https://ada:{MASK}@h/p"
    assert redact_url(f"https://{SECRET}@h/p") == f"https://{MASK}@h/p"
    assert redact_url(f"https://h/p?key={SECRET}&q=paris#x") == f"https://h/p?key={MASK}&q={MASK}#x"
    assert redact_url(f"https://h/cb#access_token={SECRET}") == f"https://h/cb#access_token={MASK}"
    assert redact_url("https://h/plain/path") == "https://h/plain/path"


@pytest.mark.parametrize(
    "text",
    [
        f"GET https://api.example.com/v1/x?api_key={SECRET} failed",
        f"could not reach redis://:{SECRET}@10.0.0.5:6379/0: refused",
        f"Authorization: Bearer {SECRET}",
        f"X-Api-Key: {SECRET}",
        f"env OPENAI_API_KEY={SECRET} set",
        f"input_value={{'name': 'x', 'headers': {{'Authorization': 'Token {SECRET}'}}}}",
        f'{{"token": "{SECRET}", "n": 1}}',
    ],
)
def test_text_loses_the_secret(text):
    assert SECRET not in redact_text(text)


def test_text_without_secrets_is_unchanged():
    text = "the kitchen light is on (max_tokens=100, session s-1), see https://h/docs"
    assert redact_text(text) == text


def test_the_processor_masks_headers_environments_and_urls():
    event = {
        "event": f"request to https://ha.local/api?token={SECRET} failed",
        "headers": {"Authorization": f"Bearer {SECRET}", "Accept": "application/json"},
        "header_list": [("Cookie", f"sid={SECRET}"), ("Accept", "text/html")],
        "env": {"VOXQUEUE_TIMEZONE": SECRET, "PATH": "/usr/bin"},
        "api_key": SECRET,
        "redis_url": f"redis://:{SECRET}@redis:6379/0",
        "error": f"ConnectError: https://{SECRET}@h/x",
        "nested": {"deeper": [{"password": SECRET}]},
        "max_tokens": 128,
        "turn_id": "t-1",
        "exc_info": True,
    }
    out = redact_event(None, "warning", dict(event))
    assert SECRET not in json.dumps(out, default=str)
    assert out["headers"]["Accept"] == "application/json"
    assert out["header_list"][1] == ("Accept", "text/html")
    assert out["env"] == {"VOXQUEUE_TIMEZONE": MASK, "PATH": MASK}
    assert out["redis_url"] == f"redis://:{MASK}@redis:6379/0"
    assert (out["max_tokens"], out["turn_id"], out["exc_info"]) == (128, "t-1", True)


def test_the_processor_in_a_structlog_chain():
    out = io.StringIO()
    logger = structlog.wrap_logger(
        structlog.PrintLogger(out), processors=[redact_event, structlog.processors.JSONRenderer()]
    )
    logger.info("calling", url=f"https://x/y?sig={SECRET}", headers={"Cookie": SECRET})
    line = json.loads(out.getvalue())
    assert SECRET not in out.getvalue()
    assert line["url"] == f"https://x/y?sig={MASK}" and line["headers"] == {"Cookie": MASK}


# -- MCP settings -----------------------------------------------------------------------------
def test_a_misconfigured_mcp_entry_does_not_log_its_token():
    bad = [
        # both transports: refused by the model validator, whose error quotes the input
        {"name": "both", "command": ["x"], "url": "http://127.0.0.1:9/mcp",
         "headers": {"Authorization": f"Bearer {SECRET}"}},
        # an unknown field next to the token
        {"name": "typo", "url": "http://127.0.0.1:9/mcp", "header": {"X-Api-Key": SECRET}},
        # headers of the wrong type: the token is the invalid value itself
        {"name": "flat", "url": "http://127.0.0.1:9/mcp", "headers": f"Bearer {SECRET}"},
    ]
    with capture_logs() as logs:
        assert servers(Settings(tools=ToolSettings(mcp_servers=bad))) == []
    assert SECRET not in json.dumps(logs, default=str)
    assert [e["server"] for e in logs] == ["both", "typo", "flat"]
    assert all(e["log_level"] == "warning" and e["error"] for e in logs)
    assert "exactly one" in logs[0]["error"] and "header" in logs[1]["error"]


def test_an_unreachable_mcp_server_does_not_log_its_token():
    url = f"http://127.0.0.1:{free_port()}/mcp?token={SECRET}"
    entry = {"name": "gone", "url": url, "headers": {"Authorization": f"Bearer {SECRET}"}}
    with capture_logs() as logs:
        assert mcp_tools(Settings(tools=ToolSettings(mcp_servers=[entry]))) == []
    assert [e["event"] for e in logs] == ["MCP server not listed; its tools are not offered"]
    assert SECRET not in json.dumps(logs, default=str)
