"""voxqueue.observability.otel in one process: the turn's trace id, parents through headers,
errors."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk.trace")

from celery.app.task import Context
from opentelemetry import trace

from voxqueue.observability import otel
from voxqueue.settings import ObservabilitySettings, Settings
from workers.runtime.task_spans import job_of, span_attributes, task_headers


def traced(path: Path) -> Settings:
    return Settings(
        observability=ObservabilitySettings(otel_enabled=True, otel_exporter=f"jsonl:{path}"))


def records(path: Path) -> dict[str, dict[str, Any]]:
    """The finished spans by name (each name once in these tests)."""
    return {s["name"]: s for s in map(json.loads, path.read_text().splitlines())}


def test_a_turn_id_is_its_trace_id():
    turn_id = uuid.uuid4().hex
    assert otel.trace_id_of(turn_id) == int(turn_id, 16)
    other = otel.trace_id_of("kitchen-turn-7")
    assert other == otel.trace_id_of("kitchen-turn-7") and 0 < other < 2**128
    assert otel.trace_id_of("0" * 32) != 0


def test_task_spans_are_children_of_the_span_that_sent_them(tmp_path):
    path = tmp_path / "spans.jsonl"
    settings = traced(path)
    turn_id = uuid.uuid4().hex
    with otel.turn_root(settings, turn_id, "voxqueue.stt.transcribe", {"n": 1}) as headers:
        pass
    assert headers["traceparent"].startswith(f"00-{turn_id}-")

    stt = otel.start_task_span(
        settings,
        "stt",
        "voxqueue.stt.transcribe",
        headers,
        turn_id,
        {"turn_id": turn_id, "queue": "stt", "seq": None},
    )
    assert stt is not None
    sent = otel.inject()  # what the STT stage puts on the agent's task
    with otel.span("stt.provider", provider="fake"):
        pass
    otel.end_task_span(stt, attributes={"session_id": "s1"})
    assert otel.inject() == {}  # the task's context is gone with its span

    agent = otel.start_task_span(
        settings, "agent", "voxqueue.agent.step", sent, turn_id, {"turn_id": turn_id}
    )
    assert agent is not None
    otel.end_task_span(agent, RuntimeError("model exploded"))

    spans = records(path)
    root, first, child, second = (
        spans[n] for n in ("turn", "voxqueue.stt.transcribe", "stt.provider", "voxqueue.agent.step")
    )
    assert {s["trace_id"] for s in spans.values()} == {turn_id}
    assert root["parent_span_id"] is None and root["kind"] == "PRODUCER"
    assert root["attributes"] == {
        "turn_id": turn_id,
        "celery.task": "voxqueue.stt.transcribe",
        "n": 1,
    }
    assert first["parent_span_id"] == root["span_id"] and first["kind"] == "CONSUMER"
    assert first["attributes"] == {"turn_id": turn_id, "queue": "stt", "session_id": "s1"}
    assert child["parent_span_id"] == first["span_id"]
    assert child["attributes"] == {"provider": "fake"}
    assert sent["traceparent"] == f"00-{turn_id}-{first['span_id']}-01"
    assert second["parent_span_id"] == first["span_id"]
    assert second["status"] == "ERROR" and second["events"] == ["exception"]
    assert first["service"] == "voxqueue-stt" and second["service"] == "voxqueue-agent"


def test_a_task_without_a_trace_context_starts_the_turns_trace(tmp_path):
    path = tmp_path / "spans.jsonl"
    turn_id = uuid.uuid4().hex
    handle = otel.start_task_span(traced(path), "tts", "voxqueue.tts.speak", {}, turn_id, {})
    assert handle is not None
    otel.end_task_span(handle)
    span = records(path)["voxqueue.tts.speak"]
    assert span["trace_id"] == turn_id and span["parent_span_id"] is None


def test_a_turn_started_inside_an_app_span_is_its_own_trace_linked_to_it(tmp_path):
    path = tmp_path / "spans.jsonl"
    settings = traced(path)
    app_tracer = otel.tracer(settings, "app")
    assert app_tracer is not None
    turn_id = uuid.uuid4().hex
    with app_tracer.start_as_current_span("http request") as outer:
        with otel.turn_root(settings, turn_id, "voxqueue.agent.step"):
            pass
        assert trace.get_current_span() is outer
    spans = records(path)
    request = spans["http request"]
    assert spans["turn"]["trace_id"] == turn_id != request["trace_id"]
    assert spans["turn"]["parent_span_id"] is None
    assert spans["turn"]["links"] == [f"{request['trace_id']}-{request['span_id']}"]


def test_off_nothing_is_traced_and_a_bad_exporter_is_refused(tmp_path):
    off = Settings(observability=ObservabilitySettings(otel_enabled=False))
    with otel.turn_root(off, uuid.uuid4().hex, "voxqueue.agent.step") as headers:
        assert headers == {}
    assert otel.start_task_span(off, "agent", "x", None, None, {}) is None
    assert otel.extract(None) is None and otel.extract({"lang": "py"}) is None
    bad = Settings(observability=ObservabilitySettings(otel_enabled=True, otel_exporter="zipkin"))
    with pytest.raises(ValueError, match="jsonl:/path/file"):
        otel.tracer(bad, "client")
    with otel.span("outside any task") as nothing:
        assert nothing is None


def test_the_worker_reads_the_context_and_the_job_of_a_task():
    tp = f"00-{'ab' * 16}-{'cd' * 8}-01"
    request = Context({"id": "t1", "traceparent": tp, "lang": "py", "argsrepr": "x"})
    assert task_headers(request) == {"traceparent": tp}
    assert task_headers(None) == {}
    job = {"turn_id": "t", "step": 2}
    assert job_of([[{"call_id": "c1"}], job]) is job  # a chord callback: results, then its job
    assert job_of([]) is None
    attrs = span_attributes(
        "voxqueue.tools.run",
        "t1",
        {"turn_id": "t", "name": "add_numbers", "call_id": "c1", "session_id": "s"},
    )
    assert (attrs["queue"], attrs["tool"], attrs["session_id"]) == ("tools", "add_numbers", "s")
