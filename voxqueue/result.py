"""Assembling a finished turn's result and reply audio from its events."""

from __future__ import annotations

from collections.abc import Iterable

from voxqueue.contracts import ToolCallRecord, TurnResult, TurnSpec
from voxqueue.turns import StreamEntry

_STATUSES = {"ok", "error", "cancelled", "timeout"}


#: Where each timing goes in a table: stages in turn order, then first audio, then the total.
_ORDER = {name: i for i, name in enumerate(("stt", "llm", "tools", "tts", "first_audio",
                                             "total"))}


def assemble(spec: TurnSpec, entries: Iterable[StreamEntry]) -> tuple[TurnResult, bytes]:
    """The turn's result and its reply PCM (sentences in order, last attempt of each)."""
    transcript = spec.text if spec.input == "text" else None
    reply: str | None = None
    tools: dict[str, ToolCallRecord] = {}
    asked: dict[str, int] = {}  # each tool call's place in the model's answers
    timings: dict[str, float] = {}
    status = "error"
    error: dict[str, str] | None = None
    chunks: dict[int, dict[int, list[tuple[int, bytes]]]] = {}
    first_audio: float | None = None
    start: dict[str, float] = {}

    def add(name: str, ms: float) -> None:
        timings[name] = round(timings.get(name, 0.0) + ms, 1)

    for entry in entries:
        ev, d = entry.event, entry.event.data
        if ev.type == "stt-start":
            start["stt"] = ev.ts
        elif ev.type == "stt-end":
            transcript = d.get("text", "")
            add("stt", (ev.ts - start.get("stt", ev.ts)) * 1000)
        elif ev.type == "llm-end":
            add("llm", float(d.get("ms", 0.0)))
            for call in d.get("tool_calls") or []:
                asked.setdefault(str(call.get("id")), len(asked))
        elif ev.type == "tool-end":
            tools[str(d.get("call_id"))] = ToolCallRecord(
                name=str(d.get("name")),
                arguments=d.get("arguments", {}),
                result=d.get("result") if d.get("ok") else None,
                error=None if d.get("ok") else d.get("error"),
                ms=float(d.get("ms", 0.0)),
            )
        elif ev.type == "reply":
            # A spoken apology never hides the answer, when there was one.
            if not (d.get("apology") and reply is not None):
                reply = d.get("text")
        elif ev.type == "tts-start":  # written with the first audio; the work began earlier
            start.setdefault("tts", float(d.get("started_at") or ev.ts))
        elif ev.type == "tts-chunk" and entry.pcm is not None:
            first_audio = ev.ts if first_audio is None else first_audio
            by_attempt = chunks.setdefault(int(d.get("seq", 0)), {})
            by_attempt.setdefault(int(d.get("attempt", 1)), []).append(
                (int(d.get("idx", 0)), entry.pcm))
        elif ev.type == "tts-end":
            start["tts-end"] = ev.ts
        elif ev.type == "error" and error is None:
            error = {"code": str(d.get("code")), "message": str(d.get("message"))}
        elif ev.type == "run-end":
            status = str(d.get("status", "error"))
            timings["total"] = round((ev.ts - spec.created_at) * 1000, 1)
    if tools:
        timings["tools"] = round(sum(t.ms for t in tools.values()), 1)
    if "tts" in start and "tts-end" in start:
        timings["tts"] = round((start["tts-end"] - start["tts"]) * 1000, 1)
    if first_audio is not None:
        timings["first_audio"] = round((first_audio - spec.created_at) * 1000, 1)
    # In the order a turn goes through them, the whole turn last.
    timings = dict(sorted(timings.items(), key=lambda kv: _ORDER.get(kv[0], len(_ORDER))))
    pcm = b"".join(
        data
        for seq in sorted(chunks)
        for _idx, data in sorted(chunks[seq][max(chunks[seq])])
    )
    result = TurnResult(
        turn_id=spec.turn_id,
        session_id=spec.session_id,
        transcript=transcript,
        reply=reply,
        # In the order the model asked for them (they run at once, and end in any order).
        tool_calls=[tools[c] for c in sorted(tools, key=lambda c: asked.get(c, len(asked)))],
        timings=timings,
        status=status if status in _STATUSES else "error",  # type: ignore[arg-type]
        error=error,
    )
    return result, pcm
