"""The agent tasks: a step, the chord callback that resumes the loop after tools, and the
chord's error callback."""

from __future__ import annotations

import json
from typing import Any

from celery import Task

from voxqueue.celery_config import AGENT_CHORD_FAILED, AGENT_RESUME, AGENT_STEP, TIME_LIMITS
from voxqueue.contracts import AgentStep, ErrorCode, ToolOutcome
from workers.agent import messages as msg
from workers.agent.loop import run_step
from workers.agent.opening import history_of, open_step, open_turn
from workers.app import app
from workers.runtime import ending
from workers.runtime.stage import begin
from workers.runtime.trust import step_problem
from workers.toolkit.policy import capped_message

_LIMITS = {"time_limit": TIME_LIMITS["agent"], "soft_time_limit": TIME_LIMITS["agent"] - 10}


@app.task(name=AGENT_STEP, bind=True, **_LIMITS)
def step(self: Task, job: dict[str, Any]) -> None:
    """Step 1 of a turn (later steps come through ``resume``)."""
    ajob = AgentStep.model_validate(job)
    stage = begin(self, ajob, "agent")
    if stage is None:
        return
    with ending.guard(stage):
        if ajob.step != 1:  # later steps come through resume, after the model asked for tools
            ending.fail(stage, ErrorCode.INVALID_INPUT,
                        f"agent step {ajob.step} sent as a first step", apologize=False)
            return
        opened = open_turn(stage, ajob)
        if opened is None:
            return
        run_step(stage, ajob, opened=opened)
        stage.complete()


@app.task(name=AGENT_RESUME, bind=True, **_LIMITS)
def resume(self: Task, outcomes: list[dict[str, Any]], job: dict[str, Any]) -> None:
    """The chord's callback: append the tool results, in call order, and take the next step."""
    ajob = AgentStep.model_validate(job)
    stage = begin(self, ajob, "agent")
    if stage is None:
        return
    with ending.guard(stage):
        rt, turn_key = stage.rt, stage.rt.keys.turn(ajob.turn_id)
        history = history_of(stage)
        # One round trip for every read of the step: the answer that asked for the tools, an
        # answer an earlier attempt of this step stored, the history.
        pipe = rt.redis.pipeline(transaction=False)
        pipe.hget(turn_key, f"answer:{ajob.step - 1}")
        pipe.hget(turn_key, f"answer:{ajob.step}")
        pipe.lrange(history.key, 0, -1)
        previous, saved, raw_history = pipe.execute()
        if (problem := step_problem(ajob.step, rt.settings, previous)) is not None:
            ending.fail(stage, ErrorCode.INVALID_INPUT, f"agent step refused: {problem}",
                        apologize=False)
            return
        ran = {r.call_id: r for r in (ToolOutcome.model_validate(o) for o in outcomes)}
        limit = rt.settings.max_tool_calls_per_answer
        # Every call of the answer is answered, in call order (OpenAI refuses a history with
        # one left open): past the cap, with an error the model can act on.
        messages = [msg.from_outcome(ran[c["id"]]) if c["id"] in ran
                    else msg.tool_error(c["id"], capped_message(limit))
                    for c in json.loads(previous or b"{}").get("calls", [])]
        # The chord's wait is the tools' run (their own spans), not a queue wait.
        ready_at = max((r.started_at + r.ms / 1000 for r in ran.values()), default=None)
        opened = open_step(stage, ajob, history.extend_in(stage.once(f"tools-{ajob.step - 1}"),
                                                          messages),
                           [json.loads(m) for m in raw_history], messages, saved, ready_at)
        stage.crash_point("agent.after-results")
        run_step(stage, ajob, opened=opened)
        stage.complete()


@app.task(name=AGENT_CHORD_FAILED, bind=True, **_LIMITS)
def chord_failed(self: Task, job: dict[str, Any]) -> None:
    """A tool task failed outright (the tools service, not a tool): end the turn, spoken."""
    ajob = AgentStep.model_validate(job)
    stage = begin(self, ajob, "agent")
    if stage is None:
        return
    with ending.guard(stage):
        stage.rt.store.release_session(stage.spec.session_id, stage.turn_id)
        ending.fail(stage, ErrorCode.INTERNAL,
                    "the tools service failed while running this answer's tool calls")
        stage.complete()
