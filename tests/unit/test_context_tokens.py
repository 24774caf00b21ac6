"""Token counting with tiktoken, offline, and the context budget per model."""

from __future__ import annotations

import hashlib

import pytest

from voxqueue.settings import AgentSettings, Settings
from workers.agent.context import tokens
from workers.agent.context.budget import budget, context_limit


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """An empty tiktoken cache folder, and no encoding built yet in this process."""
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    tokens.encoding_for.cache_clear()
    yield tmp_path
    tokens.encoding_for.cache_clear()


def test_the_shipped_encoding_lands_where_tiktoken_looks(fresh_cache):
    path = tokens.install_encoding("o200k_base")
    assert path.parent == fresh_cache
    assert path.name == "fb374d419588a4632f3f557e76b4b70aebbca790"
    assert hashlib.sha256(path.read_bytes()).hexdigest() == tokens.SHIPPED["o200k_base"]
    # A corrupt file is replaced, not trusted.
    path.write_bytes(b"garbage")
    tokens.install_encoding("o200k_base")
    assert hashlib.sha256(path.read_bytes()).hexdigest() == tokens.SHIPPED["o200k_base"]


def test_counts_follow_openais_recipe(fresh_cache):
    # 3 per message + "user" (1) + "hello world" (2) + 3 priming the reply.
    assert tokens.count_messages([{"role": "user", "content": "hello world"}], "gpt-4o-mini") == 9
    assert tokens.count_text("hello world", "gpt-4o") == 2
    assert any(p.name == "fb374d419588a4632f3f557e76b4b70aebbca790" for p in fresh_cache.iterdir())


def test_tool_calls_and_names_count():
    plain = {"role": "assistant", "content": None}
    calling = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    }
    assert tokens.count_message(calling, "gpt-4o") > tokens.count_message(plain, "gpt-4o") + 5
    named = {"role": "user", "content": "hi", "name": "ann"}
    assert (
        tokens.count_message(named, "gpt-4o")
        == tokens.count_message({"role": "user", "content": "hi"}, "gpt-4o") + 2
    )


def test_unknown_models_use_o200k_and_old_ones_cl100k():
    assert tokens.encoding_name("llama3.1:8b") == "o200k_base"
    assert tokens.encoding_name("gpt-4") == "cl100k_base"
    assert tokens.encoding_name("gpt-4.1-mini") == "o200k_base"
    assert tokens.count_text("hello world", "gpt-4") == 2


def test_context_limit_by_name_prefix_or_default():
    s = Settings(
        agent=AgentSettings(context_limits={"gpt-4o": 128_000, "gpt-4o-mini": 64_000},
                            default_context_limit=4096, context_threshold=0.5))
    assert context_limit(s, "gpt-4o-mini") == 64_000
    assert context_limit(s, "gpt-4o-mini-2024-07-18") == 64_000  # the longest prefix wins
    assert context_limit(s, "gpt-4o-2024-08-06") == 128_000
    assert context_limit(s, "mistral") == 4096
    assert budget(s, "mistral") == 2048


def test_context_limits_read_json_from_the_environment(monkeypatch):
    monkeypatch.setenv("VOXQUEUE_CONTEXT_LIMITS", '{"gpt-4o-mini": 600}')
    assert Settings().agent.context_limits == {"gpt-4o-mini": 600}
