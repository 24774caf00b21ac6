"""First-audio overhead of voxqueue against Pipecat's, on the same fake providers, side by side.

    .venv/bin/python -m bench.pipecat_side_by_side [--rounds 4] [--turns 10] [--load-turns 40]
        [--concurrency 20] [--quick]

Both run against one fake OpenAI/ElevenLabs server (a process of its own, the profile below):
voxqueue as the deployments and ``voxqueue up --processes per-queue`` run it (a private Redis,
the default pools, two agent and three TTS processes, cloud providers pointed at the fake),
asked typed questions through its client; Pipecat, a single
process voice pipeline (OpenAI LLM service → ElevenLabs HTTP TTS service, a pipeline per
session), in a virtualenv of its own that the bench makes on first use (``PIPECAT_VENV``,
``pip install`` of ``PIPECAT_REQUIREMENT``; it needs the network once) and drives through
``bench/_pipecat_driver.py``. Rounds alternate which side goes first; each side runs its turns
one at a time, then ``--concurrency`` at a time.

The floor is the profile's own minimum for the first audio: the model's first token, the tokens
up to the first sentence's mark, the voice's first byte. Overhead = first audio at the client
− question asked − floor. The fake's timestamps of each request (its arrival, each chunk written)
split it into hops: question → LLM request; the first sentence's last token → TTS request; the
TTS's first byte → first audio at the client. (Pipecat's sentence cutter waits for the next
token's first letter before it sends a sentence: that token's time is in its second hop.)
CPU per turn: voxqueue's workers, Redis and this process (its client); Pipecat's process; the
fake's for neither.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from bench.harness import bench_system, cpu_seconds, percentile
from testkit import ROOT
from testkit.fakes.provider_server import streamed_words
from voxqueue.client.direct import Client
from voxqueue.up.process_table import DEFAULT_PROCESSES

#: An LLM with a realistic first token and pace, a low-latency voice streaming faster than real
#: time.
PROFILE = {"llm_ttft_s": 0.30, "llm_tokens_per_s": 50.0, "tts_ttfb_s": 0.15, "tts_rtf": 0.25}
#: Pipecat, where the bench keeps it, and what it installs there.
PIPECAT_VENV = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "voxqueue" / \
    "bench-pipecat"
PIPECAT_REQUIREMENT = "pipecat-ai[openai,elevenlabs]==1.14.0"
DRIVER = ROOT / "bench" / "_pipecat_driver.py"
#: The first sentence ends at its 17th word (no comma nor phrase-opening word before it, so
#: neither side cuts it earlier): the floor is 0.30 + 17 / 50 + 0.15 = 0.79 s.
FIRST = "The forecast {tag} asked about shows clear skies over the whole coast the entire day " \
        "tomorrow morning."
SECOND = "Expect a light breeze from the west later on."
HOPS = ("question → LLM request", "last token of sentence → TTS request",
        "TTS first byte → client audio")


def tag_of(n: int) -> str:
    """A made-up word naming a turn (in its question and its reply's first sentence)."""
    letters = "bcdfghjklmnpqrstvwxz"
    word = ""
    for _ in range(3):
        n, digit = divmod(n, len(letters))
        word += letters[digit] + "aeiou"[digit % 5]
    return word.capitalize()


def reply_of(tag: str) -> str:
    return FIRST.format(tag=tag) + " " + SECOND


def first_sentence_token(reply: str) -> int:
    """The index of the chat stream event that ends the first sentence (event 0 is the role)."""
    words = streamed_words(reply)
    return next(i for i, word in enumerate(words, 1) if word.endswith("morning."))


def floor_s() -> float:
    tokens = first_sentence_token(reply_of(tag_of(0)))
    return PROFILE["llm_ttft_s"] + tokens / PROFILE["llm_tokens_per_s"] + PROFILE["tts_ttfb_s"]


# ------------------------------------------------------------------ Pipecat


def pipecat_python(venv: Path = PIPECAT_VENV) -> Path:
    """Pipecat's interpreter, made on first use: a virtualenv of Python 3.12 or 3.11 (Pipecat
    needs ≥ 3.11) with ``PIPECAT_REQUIREMENT``."""
    python = venv / "bin" / "python"
    ready = venv / ".installed"
    if python.exists() and ready.exists() and ready.read_text() == PIPECAT_REQUIREMENT:
        return python
    base = next((p for p in (shutil.which("python3.12"), shutil.which("python3.11"),
                             sys.executable if sys.version_info >= (3, 11) else None)
                 if p and subprocess.run([p, "-c", "import venv"],
                                         capture_output=True).returncode == 0), None)
    if base is None:
        raise SystemExit("Pipecat needs Python 3.11 or newer for its virtualenv")
    print(f"making Pipecat's virtualenv in {venv} ({PIPECAT_REQUIREMENT})", file=sys.stderr)
    subprocess.run([base, "-m", "venv", "--clear", str(venv)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", PIPECAT_REQUIREMENT], check=True)
    ready.write_text(PIPECAT_REQUIREMENT)
    return python


class Pipecat:
    """The driver process in Pipecat's virtualenv."""

    def __init__(self, python: Path, fake: Any) -> None:
        self.proc = subprocess.Popen([str(python), str(DRIVER), fake.openai_base_url, fake.url],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def run(self, turns: list[dict[str, str]], concurrency: int) -> list[dict[str, Any]]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"concurrency": concurrency, "turns": turns}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the Pipecat driver ended")
        return list(json.loads(line)["turns"])

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()


# ------------------------------------------------------------------ voxqueue


def voxqueue_run(client: Client, turns: list[dict[str, str]],
                 concurrency: int) -> list[dict[str, Any]]:
    """Ask each question, ``concurrency`` at a time; when each was asked and when its first and
    last audio reached this client."""
    todo = list(turns)
    done: list[dict[str, Any]] = []
    lock = threading.Lock()

    def worker() -> None:
        while True:
            with lock:
                if not todo:
                    return
                item = todo.pop(0)
            t0 = time.time()
            turn = client.ask(item["question"], session=item["id"])
            first = last = None
            for entry in turn.events(timeout=60):
                if entry.event.type == "tts-chunk":
                    last = time.time()
                    first = first or last
                elif entry.event.type == "error":
                    raise RuntimeError(f"turn failed: {entry.event.data}")
            with lock:
                done.append({"id": item["id"], "t0": t0, "first_audio": first or 0.0,
                             "last_audio": last or 0.0})

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return done


# ------------------------------------------------------------------ the split


def split(turn: dict[str, Any], requests: list[dict[str, Any]], tag: str,
          floor: float) -> dict[str, float]:
    """A turn's first-audio overhead and its hops (ms), from the fake's records of its chat
    request (the question names ``tag``) and its first TTS request (the sentence does)."""
    chat = next(r for r in requests if r["route"] == "chat"
                and tag in json.dumps(r["json"]["messages"][-1]))
    tts = min((r for r in requests if r["route"] == "tts" and tag in r["json"]["text"]),
              key=lambda r: r["ts"])
    last_token = chat["sent_ts"][first_sentence_token(reply_of(tag))]
    first_byte = tts["sent_ts"][0]
    ms = 1000.0
    return {
        "overhead": (turn["first_audio"] - turn["t0"] - floor) * ms,
        HOPS[0]: (chat["ts"] - turn["t0"]) * ms,
        HOPS[1]: (tts["ts"] - last_token) * ms,
        HOPS[2]: (turn["first_audio"] - first_byte) * ms,
        "providers, late on the profile": ((last_token - chat["ts"]) + (first_byte - tts["ts"])
                                           - floor) * ms,
        "whole reply received": (turn["last_audio"] - turn["t0"]) * ms,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--turns", type=int, default=10, help="one at a time, per side a round")
    parser.add_argument("--load-turns", type=int, default=40,
                        help="--concurrency at a time, per side a round")
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--quick", action="store_true", help="2 rounds of 6 and 20 turns")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.turns, args.load_turns = 2, 6, args.concurrency
    python = pipecat_python()
    floor = floor_s()
    levels = (1, args.concurrency)
    rows: dict[tuple[str, int], list[dict[str, float]]] = {
        (side, level): [] for side in ("voxqueue", "Pipecat") for level in levels}
    cpu: dict[tuple[str, int], list[float]] = {key: [] for key in rows}
    counter = iter(range(10**6))

    def batch(n: int) -> list[dict[str, str]]:
        return [{"id": f"pc-{i}", "tag": tag, "question": f"What is the weather for {tag}?"}
                for i in (next(counter) for _ in range(n)) for tag in [tag_of(i)]]

    with bench_system(PROFILE, separate_fake=True, processes=DEFAULT_PROCESSES) as system:
        fake = system.fake
        pipecat = Pipecat(python, fake)
        try:
            sides = {"voxqueue": lambda t, c: voxqueue_run(system.client, t, c),
                     "Pipecat": pipecat.run}
            # Each side's processes: voxqueue's workers, Redis and this process (its client);
            # Pipecat's one. The fake providers serve both and count for neither.
            pids = {"voxqueue": [pid for role, pid in system.pids.items()
                                 if role != "fake providers"],
                    "Pipecat": [pipecat.proc.pid]}

            def run(side: str, level: int, n: int, keep: bool) -> None:
                turns = batch(n)
                fake.script_chat(*({"match": t["tag"], "content": reply_of(t["tag"])}
                                   for t in turns))
                since = time.time()
                cpu_before = sum(cpu_seconds(pid) for pid in pids[side])
                done = sides[side]([{"id": t["id"], "question": t["question"]} for t in turns],
                                   level)
                if not keep:
                    return
                spent = sum(cpu_seconds(pid) for pid in pids[side]) - cpu_before
                cpu[(side, level)].append(spent * 1000 / n)
                requests = [r for r in fake.requests if r["ts"] >= since]
                tags = {t["id"]: t["tag"] for t in turns}
                rows[(side, level)] += [split(d, requests, tags[d["id"]], floor) for d in done]

            for side in sides:  # warm both: connections, pools, the first pipelines
                run(side, 1, 3, keep=False)
                run(side, args.concurrency, args.concurrency, keep=False)
            for r in range(args.rounds):
                order = list(sides) if r % 2 == 0 else list(sides)[::-1]
                for side in order:
                    run(side, 1, args.turns, keep=True)
                    run(side, args.concurrency, args.load_turns, keep=True)
                print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
        finally:
            pipecat.close()
    report(rows, cpu, levels, floor)


def report(rows: dict[tuple[str, int], list[dict[str, float]]],
           cpu: dict[tuple[str, int], list[float]], levels: tuple[int, ...],
           floor: float) -> None:
    today = datetime.date.today().isoformat()
    print(f"\n{today}, profile {PROFILE}, first-audio floor {floor * 1000:.0f} ms; "
          "ms, p50 / p95\n")
    columns = ["first-audio overhead", *HOPS, "providers, late on the profile",
               "whole reply received"]
    keys = ["overhead", *HOPS, "providers, late on the profile", "whole reply received"]
    print("| side | concurrent | turns | " + " | ".join(columns) + " | CPU per turn (median "
          "of rounds) |")
    print("|---|---|---|" + "---|" * (len(columns) + 1))
    for level in levels:
        for side in ("voxqueue", "Pipecat"):
            got = rows[(side, level)]
            cells = [f"{statistics.median(v):.0f} / {percentile(v, 95):.0f}"
                     for v in ([g[k] for g in got] for k in keys)]
            print(f"| {side} | {level} | {len(got)} | " + " | ".join(cells)
                  + f" | {statistics.median(cpu[(side, level)]):.0f} |")


if __name__ == "__main__":
    main()
