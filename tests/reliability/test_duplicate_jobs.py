"""A job sent twice while its first copy runs (a stage that died between sending and marking
it sent): the second copy skips; it neither takes the job over nor fences the healthy run."""

from __future__ import annotations

import json
import time

import pytest
from celery import Celery

from tests.reliability.test_forged_jobs import forge, handled
from voxqueue.celery_config import TOOLS_RUN, celery_config
from voxqueue.contracts import ToolCallJob

pytestmark = pytest.mark.integration


def test_a_copy_of_a_running_tool_call_neither_runs_nor_fences_it(client, fake,
                                                                  reliability_case):
    case = reliability_case("a tool call sent again while its first copy runs")
    case.turns += 1
    spec = forge(client)
    label = f"dup-{spec.turn_id[:8]}"
    arguments = json.dumps({"label": label})
    client.redis.hset(client.keys.turn(spec.turn_id), "answer:1", json.dumps(
        {"text": "", "calls": [{"id": "call_dup", "name": "record_side_effect",
                                "arguments": arguments}]}))
    job = ToolCallJob(turn_id=spec.turn_id, step=1, call_id="call_dup",
                      name="record_side_effect", arguments=arguments, calls=1,
                      session_id=spec.session_id)
    app = Celery("sender", set_as_current=False)
    app.conf.update(celery_config(client.settings))
    try:
        app.send_task(TOOLS_RUN, args=[job.model_dump(mode="json")], task_id=job.task_id(),
                      ignore_result=True)
        give_up = time.time() + 15
        while not any(e.event.type == "tool-start" for e in client.store.history(spec.turn_id)):
            assert time.time() < give_up, "the first copy never started"
            time.sleep(0.05)
        app.send_task(TOOLS_RUN, args=[job.model_dump(mode="json")], task_id=job.task_id(),
                      ignore_result=True)  # the same job, a new message, while the tool runs
        give_up = time.time() + 20
        while not (ends := [e.event.data for e in client.store.history(spec.turn_id)
                            if e.event.type == "tool-end"]):
            assert time.time() < give_up, "the call never ended"
            time.sleep(0.05)
    finally:
        app.close()
    handled(client, spec)  # the second copy was taken and finished: run, had it been able to
    events = [e.event for e in client.store.history(spec.turn_id)]
    assert [e.type for e in events].count("tool-start") == 1, events
    assert [e.type for e in events].count("tool-end") == 1, events
    assert ends[0]["ok"] is True and ends[0].get("error_code") is None, ends[0]
    assert int(client.redis.get(f"probe:side-effect:{label}") or 0) == 1
    case.note("the copy skipped; the first run finished and told the truth")
