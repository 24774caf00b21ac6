"""OpenTelemetry: one trace per turn across the client and every queue's worker process."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.conftest import SPEECH, RedisServer, System, system_env
from voxqueue.client.direct import Client
from voxqueue.settings import ObservabilitySettings, RedisSettings, Settings

pytestmark = pytest.mark.integration

#: This module's own system: Redis DB 2, so the shared system's workers never see its tasks.
DB = 2
STT, STEP, TOOLS, RESUME, TTS = (
    "voxqueue.stt.transcribe",
    "voxqueue.agent.step",
    "voxqueue.tools.run",
    "voxqueue.agent.resume",
    "voxqueue.tts.speak",
)


@pytest.fixture(scope="module")
def spans_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("otel") / "spans.jsonl"


@pytest.fixture(scope="module")
def traced(
    redis_server: RedisServer,
    fake_providers: Any,
    spans_file: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[System]:
    """Workers that trace into ``spans_file``."""
    url = redis_server.url[:-1] + str(DB)
    redis.Redis.from_url(url).flushdb()
    env = system_env(
        url,
        fake_providers,
        VOXQUEUE_OTEL_ENABLED="true",
        VOXQUEUE_OTEL_EXPORTER=f"jsonl:{spans_file}",
    )
    system = System(env, tmp_path_factory.mktemp("otel-logs"), beat=False)
    system.start(queues=("stt", "agent", "tools", "tts"))
    yield system
    system.stop()


@pytest.fixture(scope="module")
def traced_client(traced: System, spans_file: Path) -> Iterator[Client]:
    settings = Settings(
        redis=RedisSettings(url=traced.env["VOXQUEUE_REDIS_URL"]),
        observability=ObservabilitySettings(otel_enabled=True, otel_exporter=f"jsonl:{spans_file}"))
    with Client(settings) as client:
        yield client


def spans_of(path: Path, turn_id: str, done: Any, timeout: float = 20.0) -> list[dict[str, Any]]:
    """The turn's spans once ``done(spans)`` holds (the last task ends after the turn's end)."""
    give_up = time.time() + timeout
    while True:
        lines = path.read_text().splitlines() if path.exists() else []
        spans = [s for s in map(json.loads, lines) if s["attributes"].get("turn_id") == turn_id]
        if done(spans) or time.time() > give_up:
            return spans
        time.sleep(0.1)


def named(spans: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [s for s in spans if s["name"] == name]


def tool_turn(fake: Any) -> None:
    fake.script_transcripts("What is one plus two?")
    fake.script_chat(
        {"match": "plus", "tool_calls": [{"name": "add_numbers", "arguments": {"a": 1, "b": 2}}]},
        {"after_tool": True, "content": "Three."},
    )


def test_a_spoken_turn_is_one_trace_across_all_queues(traced, traced_client, fake, spans_file):
    tool_turn(fake)
    turn = traced_client.say(SPEECH / "command_time.wav", session="traced")
    result = turn.wait(timeout=30)
    assert result.status == "ok", result.error
    assert result.reply == "Three."
    n_tts = len({e.event.data["seq"] for e in turn._entries if e.event.type == "tts-end"})
    assert n_tts >= 1

    def complete(spans: list[dict[str, Any]]) -> bool:
        names = [s["name"] for s in spans]
        return (
            all(n in names for n in ("turn", STT, STEP, TOOLS, RESUME))
            and names.count(TTS) >= n_tts
        )

    spans = spans_of(spans_file, turn.turn_id, complete)
    assert complete(spans), [s["name"] for s in spans]

    # One trace, and its id is the turn's id.
    assert {s["trace_id"] for s in spans} == {turn.turn_id}
    by_id = {s["span_id"]: s for s in spans}
    assert len(by_id) == len(spans)
    (root,) = named(spans, "turn")
    assert root["parent_span_id"] is None and root["service"] == "voxqueue-client"
    assert root["attributes"]["celery.task"] == STT

    # Each task's parent is the span of the hop that sent it.
    def parent(span: dict[str, Any]) -> str:
        assert span["parent_span_id"] in by_id, span
        return by_id[span["parent_span_id"]]["name"]

    (stt,) = named(spans, STT)
    (step,) = named(spans, STEP)
    (tool,) = named(spans, TOOLS)
    (resume,) = named(spans, RESUME)
    assert parent(stt) == "turn"
    assert parent(step) == STT
    assert parent(tool) == STEP
    assert parent(resume) == TOOLS  # sent by the call that completed the tools' join
    assert {parent(s) for s in named(spans, TTS)} == {RESUME}  # "Three." is step 2's reply
    assert len(named(spans, TTS)) == n_tts

    # Attributes: where and what each span is.
    assert tool["attributes"]["tool"] == "add_numbers"
    assert tool["attributes"]["session_id"] == "traced"
    assert (step["attributes"]["step"], resume["attributes"]["step"]) == (1, 2)
    assert step["attributes"]["session_id"] == resume["attributes"]["session_id"] == "traced"
    assert sorted(s["attributes"]["seq"] for s in named(spans, TTS)) == list(range(n_tts))
    for span, queue in ((stt, "stt"), (step, "agent"), (tool, "tools"), (resume, "agent")):
        assert span["attributes"]["queue"] == queue
        assert span["service"] == f"voxqueue-{queue}"
        assert span["kind"] == "CONSUMER" and span["status"] == "UNSET"
        assert span["start_ns"] <= span["end_ns"]


def test_a_turn_from_an_untraced_client_still_lands_in_one_trace(traced, fake, spans_file):
    """Without the client's context the first task starts the trace, with the turn's id."""
    tool_turn(fake)
    client = traced.client()  # its settings leave tracing off
    turn = client.ask("what is one plus two?", session="untraced", speak=False)
    assert turn.wait(timeout=30).status == "ok"

    def complete(spans: list[dict[str, Any]]) -> bool:
        return {s["name"] for s in spans} >= {STEP, TOOLS, RESUME}

    spans = spans_of(spans_file, turn.turn_id, complete)
    assert complete(spans), [s["name"] for s in spans]
    assert {s["trace_id"] for s in spans} == {turn.turn_id}
    assert not named(spans, "turn")
    (step,) = named(spans, STEP)
    assert step["parent_span_id"] is None
    (tool,) = named(spans, TOOLS)
    assert tool["parent_span_id"] == step["span_id"]
    assert {s["parent_span_id"] for s in named(spans, RESUME)} == {tool["span_id"]}
