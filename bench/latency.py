"""Latency and throughput of the real system against fake providers with set latencies.

    .venv/bin/python -m bench.latency            # the whole table (a few minutes)
    .venv/bin/python -m bench.latency --quick    # fewer turns per row

Everything runs for real: a private Redis, the worker processes and pools ``voxqueue up`` runs
with cloud providers (``DEFAULT_PROCESSES``, ``DEFAULT_POOLS``), and the fake OpenAI/ElevenLabs
server in a process of its own with the latency profile below. Each row compares designs
measured side by side in this one run.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

from bench import celery_floor
from bench.harness import BenchSystem, bench_system, cpu_seconds, percentile, turn_breakdown
from testkit import SPEECH
from testkit.fakes.provider_server import streamed_words
from voxqueue.client.direct import Turn
from voxqueue.settings import Settings
from voxqueue.spoken.sentences import SentenceSplitter
from voxqueue.up.process_table import DEFAULT_PROCESSES

#: The default fake profile: a fast cloud STT, an LLM with a realistic first token and speed,
#: a low-latency TTS that streams faster than real time.
PROFILE = {"stt_delay_s": 0.30, "llm_ttft_s": 0.35, "llm_tokens_per_s": 60.0,
           "tts_ttfb_s": 0.12, "tts_rtf": 0.25}
REPLY = ("Tomorrow will be sunny in Lisbon with a high of twenty four degrees. "
         "Expect a light breeze from the west in the afternoon. "
         "In the evening it cools down to about sixteen degrees, so take a jacket.")


#: A spoken question (4.2 s) for the turns that go through STT.
QUESTION = SPEECH / "command_weather_paris.wav"


def first_audio_ms(turn: Turn) -> float:
    """End of speech (turn created) → the first audio chunk at this listener."""
    for entry in turn._entries:
        if entry.event.type == "tts-chunk":
            return (entry.event.ts - turn.spec.created_at) * 1000
    raise RuntimeError("no audio")


def run_turns(system: BenchSystem, n: int, concurrency: int,
              make: Callable[[int], Turn]) -> tuple[list[Turn], float]:
    """Run ``n`` turns, ``concurrency`` at a time; return them and the wall time."""
    turns: list[Turn] = []
    lock = threading.Lock()
    counter = iter(range(n))

    def worker() -> None:
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                return
            turn = make(i)
            result = turn.wait(timeout=120)
            if result.status != "ok":
                raise RuntimeError(f"turn failed: {result.error}")
            with lock:
                turns.append(turn)

    started = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return turns, time.perf_counter() - started


def e2e_ms(turn: Turn) -> float:
    end = next(e.event.ts for e in turn._entries if e.event.type == "run-end")
    return (end - turn.spec.created_at) * 1000


def ttfa(streaming: bool, turns: int) -> tuple[list[float], list[float]]:
    """First-audio times of typed and of spoken questions (the spoken ones include STT)."""
    env = {} if streaming else {"VOXQUEUE_SPEAK_WHILE_THINKING": "false"}
    with bench_system(PROFILE, separate_fake=True, processes=DEFAULT_PROCESSES, **env) as system:
        system.fake.script_chat({"repeat": True, "content": REPLY})
        typed, _ = run_turns(system, turns + 1, 1,
                             lambda i: system.client.ask("weather tomorrow", session=f"t{i}"))
        spoken, _ = run_turns(system, turns, 1,
                              lambda i: system.client.say(QUESTION, session=f"s{i}"))
    return [first_audio_ms(t) for t in typed[1:]], [first_audio_ms(t) for t in spoken]


def zero_overhead_ratio() -> float:
    """Streaming / sequential first audio if queues, SDKs and Redis cost nothing: only the
    profile's token times and the TTS's first byte, with the first piece cut where the real
    splitter cuts it (the fake streams a token per word; the stop is a token too)."""
    words = streamed_words(REPLY)
    splitter = SentenceSplitter(first_phrase_words=Settings().agent.first_phrase_words)
    cut_at = next(i for i, word in enumerate(words, 1) if splitter.feed(word))
    token_s = 1 / PROFILE["llm_tokens_per_s"]
    fixed = PROFILE["llm_ttft_s"] + PROFILE["tts_ttfb_s"]
    return (fixed + cut_at * token_s) / (fixed + (len(words) + 1) * token_s)


def tools_phase(parallel: bool, turns: int) -> list[float]:
    """First tool start → last tool end, for four 1-second tools."""
    calls = [{"name": "sleep_one", "arguments": {"label": str(i)}} for i in range(4)]
    script: list[dict[str, Any]]
    if parallel:
        script = [{"match": "tools", "tool_calls": calls}]
    else:  # one call per model answer: the sequential agent's way
        script = [{"match": "tools", "tool_calls": [calls[0]]}]
        script += [{"after_tool": True, "tool_calls": [c]} for c in calls[1:]]
    spans = []
    with bench_system({"llm_ttft_s": 0.0}, separate_fake=True,
                      processes=DEFAULT_PROCESSES) as system:
        for i in range(turns):
            system.fake.script_chat(*script, {"after_tool": True, "content": "All done."})
            turn = system.client.ask("run the tools", session=f"tools-{i}", speak=False)
            assert turn.wait(timeout=60).status == "ok"
            ends = [e.event for e in turn._entries if e.event.type == "tool-end"]
            start = min(e.data["started_at"] for e in ends)
            stop = max(e.data["started_at"] + e.data["ms"] / 1000 for e in ends)
            spans.append((stop - start) * 1000)
    return spans


def load(levels: list[int], per_level: int
         ) -> tuple[list[dict[str, Any]], list[float], dict[str, float]]:
    """Rows per concurrency level, the hops at one turn at a time, and CPU ms per turn by
    process at 50 concurrent turns."""
    rows = []
    hops: list[float] = []
    cpu: dict[str, float] = {}
    with bench_system(PROFILE, separate_fake=True, processes=DEFAULT_PROCESSES) as system:
        system.fake.script_chat({"repeat": True, "content": REPLY})
        run_turns(system, 4, 2, lambda i: system.client.ask("warm up", session=f"w{i}"))
        for level in levels:
            n = max(per_level, level * 2)
            before = {role: cpu_seconds(pid) for role, pid in system.pids.items()}
            turns, wall = run_turns(system, n, level, lambda i, lv=level: system.client.ask(
                "weather tomorrow", session=f"l{lv}-{i}"))
            if level == 50:  # a queue's processes (tts, tts-2…) together
                for role, pid in system.pids.items():
                    queue = role.split("-")[0]
                    cpu[queue] = cpu.get(queue, 0.0) + (cpu_seconds(pid) - before[role]) * 1000 / n
            e2e = [e2e_ms(t) for t in turns]
            if level == 1:  # the hop's own cost, without waiting behind other turns
                hops += [h for t in turns for h in turn_breakdown(t._entries)["hops_ms"]]
            rows.append({"concurrency": level, "turns": n, "throughput": n / wall,
                         "p50": statistics.median(e2e), "p95": percentile(e2e, 95),
                         "ttfa_p50": statistics.median(first_audio_ms(t) for t in turns)})
    return rows, hops, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer turns per row")
    args = parser.parse_args()
    n = 5 if args.quick else 12
    levels = [1, 10, 50, 100]
    print(f"fake profile: {PROFILE}")
    stream, stream_spoken = ttfa(True, n)
    sequential, sequential_spoken = ttfa(False, n)
    parallel = tools_phase(True, 3 if args.quick else 5)
    serial = tools_phase(False, 3 if args.quick else 5)
    rows, hops, cpu = load(levels, 10 if args.quick else 20)
    floor = celery_floor.measure_on_own_redis(50 if args.quick else 200)
    print()
    print("| measure | value |")
    print("|---|---|")
    print(f"| queue overhead per hop (enqueued → started), p50 / p95 | "
          f"{statistics.median(hops):.2f} ms / {percentile(hops, 95):.2f} ms |")
    print(f"| the floor: a bare Celery task, same settings, p50 / p95 | "
          f"{statistics.median(floor):.2f} ms / {percentile(floor, 95):.2f} ms |")
    for what, fast, slow in (("typed question", stream, sequential),
                             ("spoken question, STT included", stream_spoken, sequential_spoken)):
        s50, q50 = statistics.median(fast), statistics.median(slow)
        print(f"| time to first audio, {what}: streaming (p50) | {s50:.0f} ms |")
        print(f"| time to first audio, {what}: sequential, full reply then TTS (p50) | "
              f"{q50:.0f} ms |")
        print(f"| → streaming / sequential | {s50 / q50:.3f} |")
    print("| typed question, if queues, SDKs and Redis cost nothing (the profile's floor): "
          f"streaming / sequential | {zero_overhead_ratio():.3f} |")
    p50, r50 = statistics.median(parallel), statistics.median(serial)
    print(f"| four 1 s tools in parallel (p50 tool phase) | {p50:.0f} ms |")
    print(f"| four 1 s tools one after another (p50 tool phase) | {r50:.0f} ms |")
    print(f"| → parallel speed-up | {r50 / p50:.2f}× |")
    single = rows[0]["p95"]
    for row in rows:
        print(f"| {row['concurrency']} concurrent turns ({row['turns']}): throughput, p50, p95, "
              f"first audio p50 | {row['throughput']:.1f} turns/s, {row['p50']:.0f} ms, "
              f"{row['p95']:.0f} ms ({row['p95'] / single:.2f}× single), "
              f"{row['ttfa_p50']:.0f} ms |")
    if cpu:
        by_cost = sorted(cpu.items(), key=lambda kv: -kv[1])
        parts = ", ".join(f"{role} {ms:.0f}" for role, ms in by_cost if ms >= 0.5)
        print(f"| CPU per turn at 50 concurrent turns, ms by process | {sum(cpu.values()):.0f}: "
              f"{parts} |")


if __name__ == "__main__":
    main()
