"""Flower's feed: every task of a turn reaches an event receiver, received and succeeded, though
the workers send their task events in batches (``workers/runtime/consumer.py``)."""

from __future__ import annotations

import threading
import time
from collections import defaultdict

from voxqueue.celery_config import AGENT_STEP, TTS_SPEAK, make_celery


def test_a_turns_tasks_reach_an_event_receiver(client, fake):
    fake.script_chat({"match": "events", "content": "First sentence here. And a second one."})
    app = make_celery(client.settings, "events-probe")
    seen: dict[str, set[str]] = defaultdict(set)  # task id -> its event types
    names: dict[str, str] = {}
    bound, stop = threading.Event(), threading.Event()

    def on_event(event: dict) -> None:
        seen[event["uuid"]].add(event["type"])
        if event["type"] == "task-received":
            names[event["uuid"]] = event["name"]

    def listen() -> None:
        with app.connection_for_read() as conn:
            receiver = app.events.Receiver(conn, handlers={"task-received": on_event,
                                                           "task-succeeded": on_event})
            with receiver.consumer_context() as (connection, _channel, _consumers):
                bound.set()
                while not stop.is_set():
                    try:
                        connection.drain_events(timeout=1)
                    except TimeoutError:
                        continue

    listener = threading.Thread(target=listen, daemon=True)
    listener.start()
    try:
        assert bound.wait(10)
        check_events(client, names, seen)
    finally:  # (not left listening to a Redis that later tests stop)
        stop.set()
        listener.join(5)
        app.close()


def check_events(client, names: dict[str, str], seen: dict[str, set[str]]) -> None:
    result = client.ask("events please", session="events").wait(timeout=30)
    assert result.status == "ok", result.error

    def turn_tasks() -> set[str]:
        return {i for i, n in names.items() if n in (AGENT_STEP, TTS_SPEAK)}

    give_up = time.time() + 10
    while time.time() < give_up:
        done = turn_tasks()
        if len(done) >= 3 and all("task-succeeded" in seen[i] for i in done):
            break
        time.sleep(0.2)
    done = turn_tasks()
    assert {names[i] for i in done} == {AGENT_STEP, TTS_SPEAK}, dict(names)
    assert len(done) >= 3  # the step, and a TTS task per sentence
    assert all({"task-received", "task-succeeded"} <= seen[i] for i in done), dict(seen)
