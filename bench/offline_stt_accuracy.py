"""Offline speech recognition: pocketsphinx against Whisper on every recorded fixture.

Every recording in ``tests/fixtures/speech`` (the shared fixtures and the held-out set,
``tests/fixtures/speech/record_heldout.py``): pocketsphinx (biased by the tools' sentences)
against Whisper (faster-whisper, base, int8), side by side in one run.

    .venv/bin/python -m bench.offline_stt_accuracy            # accuracy, then end to end
    .venv/bin/python -m bench.offline_stt_accuracy --no-e2e   # accuracy only

For each engine: word error on free speech and on commands, whether each command reaches the
right tool, and with the right arguments (as the offline agent reads the transcript), seconds
per utterance; then end of speech → first reply audio through the real offline system (every
worker in its own process, local intents, Piper), on commands whose tools work offline.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
import wave
from pathlib import Path
from typing import Any

from bench.harness import bench_system, percentile
from testkit import SPEECH
from voxqueue.settings import Settings
from workers.intents import IntentMatcher, matcher_for
from workers.intents.words_to_numbers import words_to_numbers
from workers.stt.providers.base import Transcriber
from workers.tool_registry.assembly import assemble_tools
from workers.tools.builtin.safe_math import CalculationError, evaluate

#: What the shared fixtures' commands must call (written down, not read from the matcher).
FIXTURE_EXPECT: dict[str, list[dict[str, Any]]] = {
    "hey_jarvis_time_tokyo.wav": [{"tool": "get_current_time", "args": {"timezone": "tokyo"}}],
    "okay_nabu_timer.wav": [{"tool": "set_timer", "args": {"duration": "5 minutes"}}],
    "hey_jarvis_weather_paris.wav": [{"tool": "get_weather", "args": {"location": "paris"}}],
    "alexa_multiply.wav": [{"tool": "calculate", "args": {"expression": "=156"}}],
    "command_time.wav": [{"tool": "get_current_time", "args": {}}],
    "command_weather_paris.wav": [{"tool": "get_weather", "args": {"location": "paris"}}],
    "command_multiply.wav": [{"tool": "calculate", "args": {"expression": "=156"}}],
    "command_remember.wav": [{"tool": "remember",
                              "args": {"fact": "my car is parked on level 3"}}],
    "command_two_things.wav": [{"tool": "get_current_time", "args": {"timezone": "london"}},
                               {"tool": "get_weather", "args": {"location": "berlin"}}],
}
KINDS = ("command", "wake+command", "no-wake")
#: Commands for the end-to-end rows: their tools answer with no network.
E2E_TOOLS = {"get_current_time", "calculate", "set_timer", "remember", "flip_coin",
             "roll_dice", "convert_units", "random_number", "list_timers", "recall",
             "cancel_timer", "set_reminder", "days_until"}


def words(text: str) -> list[str]:
    return re.sub(r"[^a-z0-9' ]+", " ", words_to_numbers(text.lower())).split()


def wer(reference: str, hypothesis: str) -> float:
    """Word error rate: word-level edit distance over the reference length."""
    ref, hyp = words(reference), words(hypothesis)
    row = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        prev, row[0] = row[0], i
        for j, h in enumerate(hyp, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (r != h))
    return row[len(hyp)] / max(1, len(ref))


def same_value(expected: str, got: Any) -> bool:
    """An argument as a person would say it: words and numbers alike; ``=N`` is a value."""
    if isinstance(got, int | float) and not isinstance(got, bool):
        return expected.strip().lstrip("-").replace(".", "", 1).isdigit() and \
            float(expected) == float(got)
    if expected.startswith("="):
        try:
            return abs(float(evaluate(str(got))) - float(expected[1:])) < 1e-9
        except (CalculationError, ValueError, TypeError):
            return False
    return words(expected) == words(str(got))


def judge(matcher: IntentMatcher, text: str, expect: list[dict[str, Any]],
          lenient: bool) -> tuple[bool, bool]:
    """(right tools, right tools and arguments) for what the offline agent would call."""
    got = matcher.match(text, lenient=lenient)
    tools_ok = [c.tool for c in got] == [e["tool"] for e in expect]
    args_ok = tools_ok and all(
        set(e["args"]) <= set(c.arguments)
        and all(same_value(v, c.arguments[k]) for k, v in e["args"].items())
        for c, e in zip(got, expect, strict=True))
    return tools_ok, args_ok


def recordings() -> list[dict[str, Any]]:
    found = []
    for manifest in (SPEECH / "manifest.json", SPEECH / "heldout" / "manifest.json"):
        for entry in json.loads(manifest.read_text()):
            if entry["kind"] not in KINDS:
                continue
            entry = dict(entry, path=manifest.parent / entry["file"],
                         heldout=manifest.parent.name == "heldout")
            if not entry["heldout"]:
                entry["expect"] = FIXTURE_EXPECT.get(entry["file"])
            found.append(entry)
    return found


def pcm_of(path: Path) -> bytes:
    with wave.open(str(path), "rb") as w:
        return w.readframes(w.getnframes())


class HeardLive:
    """A ``Listener`` given the audio as a stream would (60 ms pieces), then its end: the path
    a streamed command takes."""

    def __init__(self, engine: Any) -> None:
        self.engine, self.name = engine, f"{engine.name}, heard live"

    def transcribe(self, pcm: bytes, *, deadline: float) -> Any:
        hearing = self.engine.hear()
        try:
            for at in range(0, len(pcm), 1920):
                hearing.feed(pcm[at:at + 1920])
            return hearing.finish()
        finally:
            hearing.close()


def engines(settings: Settings) -> dict[str, Transcriber]:
    """The engines as the settings configure them, then Whisper with the other beam size, with
    its first window not fitted to the speech (the whole short window, as before 2026-12-08),
    and with its 30 s window only (no short first pass)."""
    from workers.stt.providers.pocketsphinx_stt import PocketsphinxTranscriber
    from workers.stt.providers.whisper_stt import WhisperTranscriber

    other = 5 if settings.providers.whisper_beam_size == 1 else 1
    sphinx = PocketsphinxTranscriber(settings, assemble_tools(settings, mcp=False))
    return {"pocketsphinx": sphinx, "pocketsphinx, heard live": HeardLive(sphinx),
            "whisper": WhisperTranscriber(settings),
            f"whisper, beam {other}": WhisperTranscriber(
                settings.replace(providers={"whisper_beam_size": other})),
            "whisper, short window not fitted": WhisperTranscriber(
                settings.replace(providers={"whisper_fit_window": False})),
            "whisper, 30 s window only": WhisperTranscriber(
                settings.replace(providers={"whisper_short_window_s": 0}))}


def accuracy(settings: Settings, only: str = "") -> dict[str, list[dict[str, Any]]]:
    matcher = matcher_for(assemble_tools(settings, mcp=False))
    rows: dict[str, list[dict[str, Any]]] = {}
    chosen = {n: e for n, e in engines(settings).items() if n.startswith(only)}
    warm = pcm_of(SPEECH / "command_time.wav")
    for engine in chosen.values():  # a model's first decode is slower
        engine.transcribe(warm, deadline=time.time() + 60)
    # Each recording by every engine in turn: the machine's load drifts alike for all.
    for entry in recordings():
        pcm = pcm_of(entry["path"])
        for name, engine in chosen.items():
            started = time.perf_counter()
            text = engine.transcribe(pcm, deadline=time.time() + 60).text
            row = {"file": entry["file"], "heldout": entry["heldout"], "kind": entry["kind"],
                   "room": entry.get("room", "fixture"), "text": text,
                   "s": time.perf_counter() - started, "audio_s": entry["seconds"],
                   "wer": wer(" ".join(filter(None, [entry["wake_word"], entry["text"]])),
                              text)}
            if entry["expect"]:
                row["tool"], row["args"] = judge(matcher, text, entry["expect"],
                                                 lenient=entry["kind"] == "wake+command")
            rows.setdefault(name, []).append(row)
    return rows


#: The end-to-end rows: a name, then the STT settings of the system it runs.
E2E_SYSTEMS: dict[str, dict[str, str]] = {
    "pocketsphinx": {"VOXQUEUE_STT": "pocketsphinx"},
    "whisper": {"VOXQUEUE_STT": "whisper"},
    "whisper, short window not fitted": {"VOXQUEUE_STT": "whisper",
                                         "VOXQUEUE_WHISPER_FIT_WINDOW": "0"},
    "whisper, 30 s window only": {"VOXQUEUE_STT": "whisper",
                                  "VOXQUEUE_WHISPER_SHORT_WINDOW_S": "0"},
}


def first_audio_s(name: str, commands: list[dict[str, Any]], rounds: int) -> list[float]:
    """End of speech → first reply audio, spoken commands through the offline system."""
    times = []
    engine = name.split(",")[0]
    with bench_system(None, offline=True, **E2E_SYSTEMS[name]) as system:
        for i in range(rounds):
            for entry in commands:
                turn = system.client.say(entry["path"], session=f"e2e-{engine}-{i}")
                turn.wait(timeout=60)
                chunk = next((e.event for e in turn._entries if e.event.type == "tts-chunk"),
                             None)
                if chunk is not None:
                    times.append(chunk.ts - turn.spec.created_at)
    return times


def report(rows: dict[str, list[dict[str, Any]]], e2e: dict[str, list[float]]) -> None:
    names = list(rows)
    print(f"{'file':34} " + " ".join(f"{n:>28}" for n in names))
    for i, row in enumerate(rows[names[0]]):
        cells = []
        for n in names:
            r = rows[n][i]
            mark = "" if "tool" not in r else (" ok" if r["args"] else
                                                 (" tool" if r["tool"] else " MISS"))
            cells.append(f"{r['wer']:5.2f}{mark:5} {r['text'][:18]:18}")
        print(f"{row['file'][:34]:34} " + " ".join(f"{c:>28}" for c in cells))
    rooms = sorted({r["room"] for r in rows[names[0]] if "tool" in r})
    print("\n| engine | commands: right tool | right tool + arguments | "
          + " | ".join(rooms) + " | word error, commands | word error, free speech "
          "| s per utterance | s per command, p50 | end of speech → first reply audio, p50 / p95 |")
    print("|---|---|---|" + "---|" * len(rooms) + "---|---|---|---|---|")
    for n in names:
        cmds = [r for r in rows[n] if "tool" in r]
        free = [r for r in rows[n] if r["kind"] == "no-wake"]
        e2e_row = (f"{statistics.median(e2e[n]):.2f} s / {percentile(e2e[n], 95):.2f} s"
                   if e2e.get(n) else "not measured")
        by_room = " | ".join(
            f"{sum(r['args'] for r in cmds if r['room'] == room)}/"
            f"{sum(1 for r in cmds if r['room'] == room)}" for room in rooms)
        print(f"| {n} | {sum(r['tool'] for r in cmds)}/{len(cmds)} "
              f"| {sum(r['args'] for r in cmds)}/{len(cmds)} | {by_room} "
              f"| {statistics.mean(r['wer'] for r in cmds):.2f} "
              f"| {statistics.mean(r['wer'] for r in free):.2f} "
              f"| {statistics.mean(r['s'] for r in rows[n]):.2f} "
              f"| {statistics.median(r['s'] for r in cmds):.2f} | {e2e_row} |")
    for n in names:
        misses = [r for r in rows[n] if "tool" in r and not r["args"]]
        print(f"\n{n}: {len(misses)} commands missed")
        for r in misses:
            print(f"  {r['file']}: {r['text']!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--no-e2e", action="store_true", help="skip the end-to-end rows")
    parser.add_argument("--rounds", type=int, default=2, help="end-to-end passes per engine")
    parser.add_argument("--only", default="", help="engines whose name starts with this")
    args = parser.parse_args()
    settings = Settings()
    rows = accuracy(settings, args.only)
    e2e: dict[str, list[float]] = {}
    if not args.no_e2e:
        commands = [e for e in recordings() if e["heldout"] and e.get("room") == "quiet"
                    and e["expect"] and all(x["tool"] in E2E_TOOLS for x in e["expect"])]
        for name in E2E_SYSTEMS:
            e2e[name] = first_audio_s(name, commands, args.rounds)
    report(rows, e2e)


if __name__ == "__main__":
    main()
