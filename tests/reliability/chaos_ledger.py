"""The chaos test's ledger: what every turn, every session's history and the side effect's own
file say, checked against each other. Nothing here trusts the system under test: the effect's
file is written by the tool itself (tests/tool_modules/chaos_tools.py), the audio is decoded back
into words (testkit/fakes/chaos_model.py), and every finding names its turn and what was seen.
"""

from __future__ import annotations

import json
import re
import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from testkit.fakes.chaos_model import SIDE_EFFECT_TOOL, heard_text
from tests.reliability.ledger import history_problems, sentences_sent
from voxqueue.client.result import in_speaking_order
from voxqueue.spoken import Reading, for_speech
from voxqueue.turns import StreamEntry

#: What a tool message says when the side effect ran (see chaos_tools.ran_reply).
RAN = re.compile(r"^inscribed as run ([0-9a-f]{12})$")
#: Wordings that say the effect may or may not have happened.
UNCERTAIN = ("may or may not", "before this call finished", "abandoned")

Message = dict[str, Any]


@dataclass
class TurnRecord:
    """One turn as the client drove it, and its whole stream read back at the end."""

    turn_id: str
    session: str
    index: int
    kind: str
    """``text`` or ``audio``."""
    tag: str
    """A word of the user's message unique to this turn (finds it in the history)."""
    deadline: float
    cancelled: bool = False
    """The client cancelled it (barge-in) once a tool had started."""
    clean: bool = False
    """The closing turn of its session, with no kills."""
    entries: list[StreamEntry] = field(default_factory=list)

    def end(self) -> StreamEntry | None:
        return next((e for e in self.entries if e.event.type == "run-end"), None)

    def status(self) -> str | None:
        end = self.end()
        return None if end is None else str(end.event.data.get("status"))


@dataclass
class Findings:
    """Every check's findings, one line of evidence each; the figures are their counts."""

    turns: int = 0
    kills: Counter[str] = field(default_factory=Counter)
    lost: list[str] = field(default_factory=list)
    lost_states: list[str] = field(default_factory=list)
    """What Redis held of each lost turn at the end (keys, broker records)."""
    failed: list[str] = field(default_factory=list)
    stream_duplicates: list[str] = field(default_factory=list)
    effects_twice: list[str] = field(default_factory=list)
    false_outcomes: list[str] = field(default_factory=list)
    uncertain: list[str] = field(default_factory=list)
    spoken_not_recorded: list[str] = field(default_factory=list)
    invalid_histories: list[str] = field(default_factory=list)
    next_turn_broken: list[str] = field(default_factory=list)
    unplanned_exits: list[str] = field(default_factory=list)
    not_run: list[str] = field(default_factory=list)
    """Turns a session gave up on (the system was down), and workers that never came back."""
    effects: int = 0
    cancelled: int = 0
    failover_gaps: list[float] = field(default_factory=list)
    """Seconds from each kill of the Redis primary to the first write through the sentinels."""

    def figures(self) -> dict[str, int]:
        return {
            "turns": self.turns, "kills": sum(self.kills.values()),
            "failovers": len(self.failover_gaps),
            "cancelled": self.cancelled, "effects": self.effects, "lost": len(self.lost),
            "failed": len(self.failed), "stream duplicates": len(self.stream_duplicates),
            "effects twice": len(self.effects_twice),
            "false tool outcomes": len(self.false_outcomes),
            "uncertain outcomes": len(self.uncertain),
            "spoken != recorded": len(self.spoken_not_recorded),
            "invalid histories": len(self.invalid_histories),
            "next turn broken": len(self.next_turn_broken),
            "unplanned exits": len(self.unplanned_exits),
            "not run (system down)": len(self.not_run),
        }

    def table(self) -> str:
        kills = ", ".join(f"{q} {n}" for q, n in sorted(self.kills.items())) or "none"
        rows = [f"  {name:<22} {value}" for name, value in self.figures().items()]
        gaps = self.failover_gaps
        gap = (f"p50 {statistics.median(gaps):.1f} s, max {max(gaps):.1f} s" if gaps
               else "no failover")
        return "\n".join(["chaos figures:", *rows, f"  {'kills per queue':<22} {kills}",
                          f"  {'failover gap':<22} {gap}"])

    def evidence(self, limit: int = 8) -> str:
        out = []
        for name in ("lost", "failed", "stream_duplicates", "effects_twice", "false_outcomes",
                     "uncertain", "spoken_not_recorded", "invalid_histories",
                     "next_turn_broken", "unplanned_exits", "not_run", "lost_states"):
            found: list[str] = getattr(self, name)
            out += [f"{name}: {line}" for line in found[:limit]]
            if len(found) > limit:
                out.append(f"{name}: … and {len(found) - limit} more")
        return "\n".join(out)


def read_ledger(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# -- turns ---------------------------------------------------------------------------------
def check_turn_ends(found: Findings, turn: TurnRecord) -> None:
    """Lost: no run-end written by the system before the deadline (a ``timeout`` end is the
    sweeper's or the waiting client's). Failed: ended in time with an error."""
    end = turn.end()
    events = [e.event.type for e in turn.entries if e.event.type != "tts-chunk"]
    where = f"turn {turn.turn_id} (session {turn.session} #{turn.index}, {turn.kind})"
    if end is None:
        found.lost.append(f"{where}: no run-end; events {events}")
        return
    status = turn.status()
    if status == "timeout" or end.event.ts > turn.deadline:
        late = end.event.ts - turn.deadline
        found.lost.append(f"{where}: ended {status} {late:+.1f} s from its deadline; "
                          f"events {events}")
    elif status == "error":
        errors = [e.event.data for e in turn.entries if e.event.type == "error"]
        found.failed.append(f"{where}: ended with error {errors}")
    elif status == "cancelled" and not turn.cancelled:
        found.failed.append(f"{where}: cancelled by no one; events {events}")
    ends = sum(e.event.type == "run-end" for e in turn.entries)
    chunks = Counter((e.event.data.get("seq"), e.event.data.get("idx"),
                      e.event.data.get("attempt"))
                     for e in turn.entries if e.event.type == "tts-chunk")
    doubled = {k: n for k, n in chunks.items() if n > 1}
    if ends > 1 or doubled:
        found.stream_duplicates.append(f"{where}: {ends} run-end(s), chunks twice {doubled}")


def spoken_problems(turn: TurnRecord, recorded: str | None) -> list[str]:
    """Why what was heard in ``turn`` is not the reply recorded in its session's history."""
    texts, problems = sentences_sent(turn.entries)
    spoken = " ".join(texts[s] for s in sorted(texts))
    replies = [str(e.event.data.get("text", "")) for e in turn.entries
               if e.event.type == "reply"]
    if recorded is None:
        problems.append(f"no reply of this turn in the history; spoken {spoken!r}")
    elif _norm(spoken) != _norm(recorded):
        problems.append(f"sent to TTS {spoken!r} but recorded {recorded!r}")
    if recorded is not None and replies and not _norm(recorded).endswith(_norm(replies[-1])):
        # (the reply event is the last step's text; earlier steps' text came before it)
        problems.append(f"reply event {replies[-1]!r} but recorded {recorded!r}")
    heard = heard_text(b"".join(in_speaking_order(iter(turn.entries))))
    said = "".join(for_speech(texts[s], Reading.DIGITS) for s in sorted(texts))
    if heard != said:
        problems.append(f"heard {heard!r} but the voice was given {said!r}")
    return problems


def _norm(text: str) -> str:
    return " ".join(text.split())


# -- histories -------------------------------------------------------------------------------
def turn_messages(history: list[Message], tag: str) -> list[Message] | None:
    """The messages of the turn whose user message holds ``tag``: from it to the next user
    message (None when it is not in the history)."""
    at = next((i for i, m in enumerate(history)
               if m.get("role") == "user" and tag in str(m.get("content"))), None)
    if at is None:
        return None
    end = next((i for i in range(at + 1, len(history)) if history[i].get("role") == "user"),
               len(history))
    return history[at:end]


def recorded_reply(history: list[Message], tag: str) -> str | None:
    """What the turn's history records the assistant saying (None when it has no final
    reply): the text of each step in order, a step that asked for tools included (its text is
    spoken too); two final replies read as both, joined, so they never equal what was spoken
    once."""
    messages = turn_messages(history, tag) or []
    said = [m for m in messages if m.get("role") == "assistant" and m.get("content")]
    if not any(not m.get("tool_calls") for m in said):
        return None
    parts: list[str] = []
    for i, m in enumerate(said):
        if i and not m.get("tool_calls") and not said[i - 1].get("tool_calls"):
            parts.append("||")  # a second final reply
        parts.append(str(m["content"]))
    return " ".join(parts)


def check_history(found: Findings, session: str, history: list[Message]) -> None:
    """Valid for OpenAI anywhere in the list: every call answered once, right after it, in
    order; no tool message unasked; no call id used twice."""
    problems = history_problems(history)
    ids = Counter(c["id"] for m in history if m.get("role") == "assistant"
                  for c in m.get("tool_calls") or [])
    problems += [f"call id {i} asked {n} times" for i, n in ids.items() if n > 1]
    last = history[-1] if history else {}
    if last.get("tool_calls") and problems and problems[-1].endswith("answered by []"):
        problems[-1] += " (at the end: the next turn's opening would answer them)"
    if history and history[0].get("role") != "system":
        problems.append(f"starts with {history[0].get('role')}, not the system prompt")
    if problems:
        roles = [f"{m.get('role')}{'+calls' if m.get('tool_calls') else ''}" for m in history]
        found.invalid_histories.append(f"session {session}: {problems}; roles {roles}")


def check_effects(found: Findings, histories: dict[str, list[Message]],
                  ledger: list[dict[str, Any]]) -> None:
    """No effect twice; every tool message about the side effect true to the ledger file."""
    found.effects = len(ledger)
    runs: dict[str, list[dict[str, Any]]] = {}
    for line in ledger:
        runs.setdefault(line["call"], []).append(line)
    for call, lines in runs.items():
        if len(lines) > 1:
            found.effects_twice.append(
                f"call {call} of turn {lines[0]['turn']} ran {len(lines)} times: "
                f"{[(x['run'], x['pid']) for x in lines]}")
    asked: set[str] = set()
    for session, history in histories.items():
        calls = {c["id"] for m in history if m.get("role") == "assistant"
                 for c in m.get("tool_calls") or [] if c["function"]["name"] == SIDE_EFFECT_TOOL}
        asked |= calls
        for m in history:
            if m.get("role") == "tool" and m.get("tool_call_id") in calls:
                _told(found, session, str(m["tool_call_id"]), str(m.get("content")),
                      runs.get(str(m["tool_call_id"]), []))
    for call, lines in runs.items():
        if call not in asked:
            found.false_outcomes.append(f"call {call} of turn {lines[0]['turn']} ran but no "
                                        "history holds its call")


def _told(found: Findings, session: str, call: str, content: str,
          lines: list[dict[str, Any]]) -> None:
    where = f"session {session}, call {call}"
    ran = RAN.match(content)
    if ran is not None:
        if ran.group(1) not in {x["run"] for x in lines}:
            found.false_outcomes.append(f"{where}: told it ran as run {ran.group(1)}, the "
                                        f"ledger has {[x['run'] for x in lines]}")
    elif any(word in content for word in UNCERTAIN):
        found.uncertain.append(f"{where}: told {content!r}; it ran {len(lines)} time(s)")
    elif lines:
        found.false_outcomes.append(f"{where}: told {content!r} but it ran "
                                    f"(run {lines[0]['run']}, turn {lines[0]['turn']})")
