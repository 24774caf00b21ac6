"""The Prometheus exporter, fed by real turns' events."""

from __future__ import annotations

import threading
import urllib.request

import pytest

from testkit.clock import wait_until
from tests.conftest import free_port
from voxqueue.observability.metrics import Exporter

pytestmark = pytest.mark.integration


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
        return answer.read().decode()


def value(text: str, prefix: str) -> float:
    for line in text.splitlines():
        if line.startswith(prefix):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{prefix} not in metrics")


def test_histograms_fill_from_turn_events(client, fake):
    # The exporter labels the tools the workers offer: it needs their tool modules too.
    exporter = Exporter(client.settings.replace(
        tools={"modules": "testkit.probe_tools"}))
    port = free_port()
    exporter.serve(port)
    thread = threading.Thread(target=exporter.run, kwargs={"sample_every_s": 0.5}, daemon=True)
    thread.start()
    try:
        fake.script_chat(
            {"match": "metrics", "tool_calls": [{"name": "add_numbers",
                                                 "arguments": {"a": 1, "b": 2}}]},
            {"after_tool": True, "content": "It is three."})
        import time

        # The exporter follows turns that end after it started: it has started when it has
        # sampled the queues, which it does once it knows where the ended turns' stream is.
        wait_until(lambda: 'voxqueue_queue_depth{queue="stt"}' in scrape(port),
                   "the exporter's first sample")
        result = client.ask("metrics please", session="metrics").wait(timeout=30)
        assert result.status == "ok"
        deadline = time.time() + 10
        text = ""
        while time.time() < deadline:
            text = scrape(port)
            if 'voxqueue_turns_total{status="ok"}' in text:
                break
            time.sleep(0.2)
    finally:
        exporter.stop()
        thread.join(5)
    assert value(text, 'voxqueue_turns_total{status="ok"}') >= 1
    assert value(text, 'voxqueue_queue_wait_seconds_count{queue="agent"}') >= 2
    assert value(text, 'voxqueue_queue_wait_seconds_count{queue="tools"}') >= 1
    assert value(text, 'voxqueue_stage_seconds_count{provider="openai",stage="llm"}') >= 2
    tts_ttfb = 'voxqueue_provider_ttfb_seconds_count{provider="elevenlabs",stage="tts"}'
    assert value(text, tts_ttfb) >= 1
    assert value(text, 'voxqueue_tool_seconds_count{ok="true",tool="add_numbers"}') >= 1
    assert value(text, "voxqueue_time_to_first_audio_seconds_count") >= 1
    assert value(text, 'voxqueue_workers{queue="tts"}') >= 1
    assert value(text, 'voxqueue_queue_depth{queue="stt"}') == 0


def test_the_exporter_reads_a_turns_events_without_its_audio(client, fake):
    fake.script_chat({"match": "speak", "content": "Here is a sentence. And another one."})
    result = client.ask("speak to me", session="metrics-audio").wait(timeout=30)
    assert result.status == "ok"
    exporter = Exporter(client.settings)
    history = list(client.store.history(result.turn_id))
    events = exporter.events(result.turn_id)
    # Every entry, in order, with the same event; no audio fetched.
    assert [(e.id, e.event) for e in events] == [(e.id, e.event) for e in history]
    assert any(e.pcm for e in history) and not any(e.pcm for e in events)
