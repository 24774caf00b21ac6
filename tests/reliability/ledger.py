"""Counting what happened to the turns of a reliability case: lost, duplicated, late.

A turn is *lost* when the system never ended it: no ``run-end``, or only the one a waiting
client writes itself once the deadline's grace period is over. It is *duplicated* when
anything that must happen once happened more often: a second ``run-end``, the same
``tts-chunk`` (seq, idx, attempt) twice, or a second ``reply`` in a turn that ended ``ok``.
"""

from __future__ import annotations

import json
import os
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from voxqueue.client.direct import DEADLINE_GRACE_S, Turn
from voxqueue.contracts import TurnResult
from voxqueue.turns import StreamEntry, TurnStore

#: Environment variable naming the JSON-lines file the rows are appended to.
REPORT_ENV = "VOXQUEUE_RELIABILITY_REPORT"


@dataclass(frozen=True)
class TurnAudit:
    """What a turn's whole stream (read back from Redis) says about it."""

    turn_id: str
    run_ends: int
    duplicate_chunks: int
    replies: int
    status: str | None
    error_code: str | None
    ended_at: float | None
    deadline: float
    after_end: int
    """Entries written after the first ``run-end`` (it must be the last)."""

    @property
    def rescued(self) -> bool:
        """Ended only by the waiting client, once the deadline's grace period was over.

        The system ends an overdue turn itself within seconds (beat's sweeper runs every 2 s).
        """
        return self.ended_at is not None and self.ended_at >= self.deadline + DEADLINE_GRACE_S

    @property
    def lost(self) -> bool:
        return self.run_ends == 0 or self.rescued

    @property
    def duplicates(self) -> int:
        extra_replies = self.replies - 1 if self.status == "ok" and self.replies > 1 else 0
        return max(0, self.run_ends - 1) + self.duplicate_chunks + extra_replies

    @property
    def late_s(self) -> float:
        """Seconds past the deadline when the turn ended (0 when in time)."""
        return 0.0 if self.ended_at is None else max(0.0, self.ended_at - self.deadline)


def audit(store: TurnStore, turn: Turn) -> TurnAudit:
    """Audit a turn from every entry of its stream, not only those its handle has seen."""
    entries = list(store.history(turn.turn_id))
    return audit_entries(turn.turn_id, turn.spec.deadline, entries)


def audit_entries(turn_id: str, deadline: float, entries: list[StreamEntry]) -> TurnAudit:
    chunks = Counter(
        (e.event.data.get("seq"), e.event.data.get("idx"), e.event.data.get("attempt"))
        for e in entries
        if e.event.type == "tts-chunk"
    )
    ends = [e for e in entries if e.event.type == "run-end"]
    first_end = next((i for i, e in enumerate(entries) if e.event.type == "run-end"), None)
    errors = [e for e in entries if e.event.type == "error"]
    return TurnAudit(
        turn_id=turn_id,
        run_ends=len(ends),
        duplicate_chunks=sum(n - 1 for n in chunks.values()),
        replies=sum(1 for e in entries if e.event.type == "reply"),
        status=str(ends[0].event.data.get("status")) if ends else None,
        error_code=str(errors[0].event.data.get("code")) if errors else None,
        ended_at=ends[0].event.ts if ends else None,
        deadline=deadline,
        after_end=0 if first_end is None else len(entries) - first_end - 1,
    )


@dataclass
class Case:
    """One row of the reliability table: a fault or attack, the turns it ran, what went wrong."""

    case: str
    turns: int = 0
    lost: int = 0
    duplicates: int = 0
    after_end: int = 0
    """Events written after a turn's run-end (reported; see test_run_end_is_the_last_event)."""
    notes: list[str] = field(default_factory=list)
    audits: list[TurnAudit] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def check(self, turn: Turn, timeout: float = 60.0) -> TurnResult:
        """Wait for the turn, audit its stream, count it, and return its result.

        Fails the test when the turn is lost (never ended, or ended only by the client long
        after its deadline) or duplicated anything.
        """
        with self._lock:
            self.turns += 1
        try:
            result = turn.wait(timeout=timeout)
        except TimeoutError:
            with self._lock:
                self.lost += 1
            raise
        found = audit(turn.client.store, turn)
        self.count(found)
        assert not found.lost, f"turn {turn.turn_id} was lost ({found.late_s:.1f} s late): {found}"
        assert found.duplicates == 0, f"turn {turn.turn_id} duplicated something: {found}"
        return result

    def count(self, found: TurnAudit) -> None:
        """Add an audited turn's losses and duplicates (``check`` counts the turn itself)."""
        with self._lock:
            self.audits.append(found)
            self.lost += int(found.lost)
            self.duplicates += found.duplicates
            self.after_end += found.after_end

    def refused(self, n: int = 1) -> None:
        """Count input refused before anything was enqueued (tried, not lost)."""
        with self._lock:
            self.turns += n

    def note(self, text: str) -> None:
        self.notes.append(text)

    def row(self, outcome: str) -> dict[str, Any]:
        notes = list(self.notes)
        if self.after_end:
            notes.append(f"{self.after_end} event(s) written after run-end")
        return {
            "case": self.case,
            "turns": self.turns,
            "lost": self.lost,
            "duplicates": self.duplicates,
            "notes": "; ".join(notes),
            "outcome": outcome,
        }


def report_path(default_dir: Path) -> Path:
    """Where rows go: ``$VOXQUEUE_RELIABILITY_REPORT``, else a file in pytest's tmp dir."""
    chosen = os.environ.get(REPORT_ENV)
    return Path(chosen) if chosen else default_dir / "reliability.jsonl"


def append_row(path: Path, row: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as out:
        out.write(json.dumps(row, ensure_ascii=False) + "\n")


# -- what a crash must never break ---------------------------------------------------------------
def history_problems(messages: list[dict[str, Any]]) -> list[str]:
    """Why OpenAI would refuse this history, if it would: every assistant tool call answered by
    exactly one tool message, right after it and in order; no tool message unasked."""
    problems: list[str] = []
    i = 0
    while i < len(messages):
        m = messages[i]
        if m.get("role") == "tool":
            problems.append(f"message {i}: a tool message no assistant call asked for")
        calls = [c["id"] for c in m.get("tool_calls") or []] if m.get("role") == "assistant" else []
        i += 1
        if calls:
            answered = []
            while i < len(messages) and messages[i].get("role") == "tool":
                answered.append(messages[i].get("tool_call_id"))
                i += 1
            if answered != calls:
                problems.append(f"calls {calls} answered by {answered}")
    return problems


def sentences_sent(entries: list[StreamEntry]) -> tuple[dict[int, str], list[str]]:
    """The sentences a turn sent to the voice, by piece number (from its ``tts-start``
    events), and why they are not one text per piece numbered 0..n-1."""
    problems: list[str] = []
    texts: dict[int, str] = {}
    for e in entries:
        if e.event.type == "tts-start":
            seq, text = int(e.event.data["seq"]), str(e.event.data.get("text", ""))
            if texts.setdefault(seq, text) != text:
                problems.append(f"piece {seq} sent to the voice as {texts[seq]!r} and {text!r}")
    if sorted(texts) != list(range(len(texts))):
        problems.append(f"pieces {sorted(texts)} are not 0..n-1")
    return texts, problems


def heard_problems(entries: list[StreamEntry], played: bytes,
                   expected_pcm: Any) -> list[str]:
    """Why what the listener heard is not every sentence of the reply exactly once, in order,
    with its own words. ``expected_pcm(text)`` is the audio the voice makes for a sentence."""
    texts, problems = sentences_sent(entries)
    replies = [e.event.data.get("text", "") for e in entries if e.event.type == "reply"]
    spoken = " ".join(texts[s] for s in sorted(texts))
    if replies and " ".join(str(replies[-1]).split()) != " ".join(spoken.split()):
        problems.append(f"heard {spoken!r} but the reply is {replies[-1]!r}")
    want = b"".join(expected_pcm(texts[s]) for s in sorted(texts))
    if played != want:
        problems.append(f"heard {len(played)} bytes of audio, the sentences make {len(want)}")
    return problems
