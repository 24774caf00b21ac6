"""The agent tasks: a step, and the step that resumes the loop once the tools joined."""

from __future__ import annotations

import json
from typing import Any

from celery import Task

from voxqueue.celery_config import AGENT_RESUME, AGENT_STEP, TIME_LIMITS
from voxqueue.contracts import AgentStep, ErrorCode
from workers.agent import confirmation
from workers.agent import messages as msg
from workers.agent.loop import run_step
from workers.agent.opening import history_of, open_step, open_turn
from workers.app import app
from workers.runtime import ending
from workers.runtime.join import read_outcomes
from workers.runtime.stage import begin
from workers.runtime.trust import step_problem
from workers.tool_registry.policy import capped_message

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
def resume(self: Task, *args: Any) -> None:
    """The step after tools (sent by the call that completed their join): append the stored
    tool results, in call order, and take the next step. Its one argument is the job (a
    message of an older version, a chord's callback, put the members' results before it)."""
    ajob = AgentStep.model_validate(args[-1])
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
        asking = json.loads(previous or b"{}")  # the answer that asked for the tools
        made = asking.get("calls", [])
        calls = [c["id"] for c in made]
        limit = rt.settings.agent.max_tool_calls_per_answer
        ran = read_outcomes(rt, ajob.turn_id, calls[:limit])
        # A side effect held back for the person's yes: the system asks about the first one,
        # and its question is this step's answer (the model is not asked).
        asked = confirmation.ask(stage, made[:limit], ran)
        # Every call of the answer is answered, in call order (OpenAI refuses a history with
        # one left open): past the cap, with an error the model can act on.
        messages = [(asked.message(c, ran[c].name) if asked and c in asked.held
                     else msg.from_outcome(ran[c])) if c in ran
                    else msg.tool_error(c, capped_message(limit) if i >= limit
                                        else "Error: this call's outcome was not recorded.")
                    for i, c in enumerate(calls)]
        # The join's wait is the tools' run (their own spans), not a queue wait.
        ready_at = max((r.started_at + r.ms / 1000 for r in ran.values()), default=None)
        once = history.extend_in(stage.once(f"tools-{ajob.step - 1}"), messages)
        if asked is not None:
            asked.write_in(once, stage, ajob.step)
            saved = saved or asked.answer()
        opened = open_step(stage, ajob, once, [json.loads(m) for m in raw_history], messages,
                           saved, ready_at)
        stage.crash_point("agent.after-results")
        run_step(stage, ajob, opened=opened, reply_chars=int(asking.get("reply_chars", 0)))
        stage.complete()
