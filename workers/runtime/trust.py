"""Workers trust nothing they receive: a job is checked against the turn's stored spec and the
worker's own settings, whoever wrote them (a gateway, a client, or someone with Redis access)."""

from __future__ import annotations

import json
import time
from typing import Any

from voxqueue.contracts import ToolCallJob, TurnSpec
from voxqueue.keys import Keys
from voxqueue.settings import Settings

#: Seconds of clock difference tolerated between the machine that made a turn and this one.
CLOCK_SLACK_S = 30.0


def spec_problem(spec: TurnSpec, settings: Settings, keys: Keys) -> str | None:
    """Why this turn must not be worked on, or None: every limit is this worker's own."""
    if spec.text is not None and len(spec.text) > settings.turns.max_text_chars:
        return (f"its text has {len(spec.text)} characters, over the limit of "
                f"{settings.turns.max_text_chars}")
    if spec.created_at > time.time() + CLOCK_SLACK_S:
        return "it was made in the future"
    if spec.deadline - spec.created_at > settings.turns.max_deadline_s + CLOCK_SLACK_S:
        return (f"its deadline is {spec.deadline - spec.created_at:.0f} s after its start, over "
                f"the ceiling of {settings.turns.max_deadline_s:.0f} s")
    own_key = keys.speech(spec.turn_id) if spec.audio_stream else keys.audio(spec.turn_id)
    if spec.audio_key is not None and spec.audio_key != own_key:
        return "its audio is not under the turn's own key"
    if (spec.audio_seconds or 0.0) > settings.turns.max_audio_seconds + 1:
        return f"its audio is {spec.audio_seconds} s, over {settings.turns.max_audio_seconds} s"
    return None


def call_problem(job: ToolCallJob, stored_answer: Any) -> str | None:
    """Why this tool call must not run, or None: it must be one the model asked for in the
    turn's stored answer of that step, with the same name and arguments."""
    if stored_answer is None:
        return f"the model gave no answer at step {job.step} of this turn"
    calls = json.loads(stored_answer).get("calls", [])
    for call in calls:
        if call.get("id") == job.call_id:
            if call.get("name") != job.name or call.get("arguments") != job.arguments:
                return "it differs from the call the model made"
            return None
    return f"the model made no call {job.call_id!r} at step {job.step}"


def step_problem(step: int, settings: Settings, previous_answer: Any) -> str | None:
    """Why agent step ``step`` must not run: past the cap, or not following a tool answer."""
    if step > settings.agent.max_steps + 1:
        return f"step {step} is past the cap of {settings.agent.max_steps}"
    if step > 1 and (previous_answer is None
                     or not json.loads(previous_answer).get("calls")):
        return f"step {step - 1} of this turn asked for no tools"
    return None


def effect_problem(spec: TurnSpec, tool: str, side_effects: bool) -> str | None:
    """Why this turn may not run ``tool``: a side effect its client did not allow it (the
    turn's ``effects_allowed``); None when it may."""
    if not side_effects or spec.effects_allowed is None or tool in spec.effects_allowed:
        return None
    return (f"{tool} has side effects, and this conversation's client does not allow it "
            "(for Wyoming: VOXQUEUE_WYOMING_TOOLS)")
