"""Offline speech recognition on the spoken fixtures: pocketsphinx's general model alone
("before") against the recognizer biased by the tools' example sentences ("after").

    .venv/bin/python -m bench.offline_stt_accuracy

For every fixture with words (commands, wake word + command, free speech) it prints the
word error rate against what was said (the wake phrase included), and whether the transcript
asks for the right tool calls with the right arguments ("command accuracy", read by the local
intent matcher, which skips a wake word heard before the request). Free-text arguments
("remember that {fact}") are compared word for word, so "args" is stricter than "tool".
"""

from __future__ import annotations

import argparse
import json
import re
import time
import wave
from typing import Any

from tests.conftest import SPEECH
from voxqueue.settings import Settings
from workers.intents import IntentMatcher
from workers.stt.providers.pocketsphinx_stt import PocketsphinxTranscriber
from workers.toolkit.assembly import assemble_tools

KINDS = ("command", "wake+command", "no-wake")


def words(text: str) -> list[str]:
    return re.sub(r"[^a-z0-9' ]+", " ", text.lower()).split()


def wer(reference: str, hypothesis: str) -> float:
    """Word error rate: word-level edit distance over the reference length."""
    ref, hyp = words(reference), words(hypothesis)
    row = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        prev, row[0] = row[0], i
        for j, h in enumerate(hyp, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (r != h))
    return row[len(hyp)] / max(1, len(ref))


def calls(matcher: IntentMatcher, text: str) -> list[tuple[str, dict[str, str]]]:
    return [
        (c.tool, {k: " ".join(words(str(v))) for k, v in c.arguments.items()})
        for c in matcher.match(text, lenient=True)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.parse_args()
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    started = time.perf_counter()
    stt = PocketsphinxTranscriber(settings, assemble_tools(settings))
    print(f"recognizer built in {time.perf_counter() - started:.2f} s\n")
    entries = [e for e in json.loads((SPEECH / "manifest.json").read_text()) if e["kind"] in KINDS]
    rows: list[dict[str, Any]] = []
    for entry in entries:
        with wave.open(str(SPEECH / entry["file"]), "rb") as w:
            pcm = w.readframes(w.getnframes())
        said = " ".join(filter(None, [entry["wake_word"], entry["text"]]))
        expected = calls(stt.matcher, entry["text"])
        row: dict[str, Any] = {
            "file": entry["file"],
            "kind": entry["kind"],
            "seconds": entry["seconds"],
            "expected": expected,
        }
        for mode, biased in (("general", False), ("biased", True)):
            t0 = time.perf_counter()
            heard = stt.recognize(pcm, biased=biased)
            row[f"{mode}_s"] = time.perf_counter() - t0
            raw = heard.command_text if heard.source == "commands" else heard.text
            got = calls(stt.matcher, heard.text)
            row[f"{mode}_text"] = heard.text
            row[f"{mode}_wer"] = wer(said, raw)
            row[f"{mode}_tool"] = [c[0] for c in got] == [c[0] for c in expected]
            row[f"{mode}_args"] = got == expected
        rows.append(row)
    report(rows)


def report(rows: list[dict[str, Any]]) -> None:
    head = (
        f"{'file':30} {'kind':13} {'WER gen':>7} {'WER bias':>8} {'tool g/b':>9} "
        f"{'args g/b':>9} {'s gen':>6} {'s bias':>6}"
    )
    print(head)
    print("-" * len(head))

    def mark(row: dict[str, Any], key: str) -> str:
        if not row["expected"]:
            return "n/a"
        return "/".join("y" if row[f"{m}_{key}"] else "n" for m in ("general", "biased"))

    for r in rows:
        print(
            f"{r['file']:30} {r['kind']:13} {r['general_wer']:7.2f} {r['biased_wer']:8.2f} "
            f"{mark(r, 'tool'):>9} {mark(r, 'args'):>9} {r['general_s']:6.2f} "
            f"{r['biased_s']:6.2f}"
        )
    print()
    for r in rows:
        print(f"{r['file']}\n  general: {r['general_text']}\n  biased:  {r['biased_text']}")
    commands = [r for r in rows if r["expected"]]
    print("\nsummary")
    for mode in ("general", "biased"):
        mean_wer = sum(r[f"{mode}_wer"] for r in rows) / len(rows)
        cmd_wer = sum(r[f"{mode}_wer"] for r in commands) / len(commands)
        tools = sum(r[f"{mode}_tool"] for r in commands)
        args = sum(r[f"{mode}_args"] for r in commands)
        secs = sum(r[f"{mode}_s"] for r in rows)
        audio = sum(r["seconds"] for r in rows)
        print(
            f"  {mode:8} WER all {mean_wer:.2f}, WER commands {cmd_wer:.2f}; "
            f"right tool {tools}/{len(commands)}, right tool+args {args}/{len(commands)}; "
            f"{secs / audio:.2f} s per audio second"
        )


if __name__ == "__main__":
    main()
