"""Round trips to Redis a turn waits on, measured as a remote Redis would show them.

    .venv/bin/python -m bench.round_trips                # the table (about a minute)
    .venv/bin/python -m bench.round_trips --commands tool  # also: one turn's commands

Every process (client, workers) reaches Redis through :mod:`bench.redis_delay`'s proxy. Each
turn runs with no added delay and with ``--one-way-ms`` each way (2 ms round trip by default),
alternating, on the processes and pools ``voxqueue up`` runs, with providers that answer at
once. The difference in time, divided by the difference in one PING's round trip measured
through the proxy in the same run, is the number of sequential round trips the turn waited on.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from bench.harness import BenchSystem, bench_system
from bench.redis_delay import DelayProxy, measured_rtt_s
from testkit import ROOT, SPEECH
from voxqueue.client.direct import Turn
from voxqueue.up.process_table import DEFAULT_PROCESSES

QUESTION = SPEECH / "command_weather_paris.wav"
#: Providers that answer at once: what is left is our path.
INSTANT = {"stt_delay_s": 0.0, "llm_ttft_s": 0.0, "llm_tokens_per_s": 2000.0,
           "tts_ttfb_s": 0.0, "tts_rtf": 0.0}


def _listener_timings(system: BenchSystem, make: Callable[[int], Turn], i: int
                      ) -> tuple[float, float]:
    """First audio and whole turn as the client hears them, from the moment it asked."""
    started = time.time()
    turn = make(i)
    first: float | None = None
    for _pcm in turn.playback(timeout=60):
        if first is None:
            first = time.time()
    result = turn.wait(timeout=60)
    if result.status != "ok" or first is None:
        raise RuntimeError(f"turn failed: {result.error}")
    return (first - started) * 1000, (time.time() - started) * 1000


def scenarios(system: BenchSystem) -> dict[str, Callable[[int], Turn]]:
    c = system.client
    return {
        "typed, one sentence": lambda i: c.ask("hello there", session=f"typed-{i}"),
        "spoken, one sentence": lambda i: c.say(QUESTION, session=f"spoken-{i}"),
        "typed, one tool call": lambda i: c.ask("please add two numbers", session=f"tool-{i}"),
    }


def script(system: BenchSystem) -> None:
    fake = system.fake
    fake.script_transcripts({"text": "hello there", "repeat": True})
    fake.script_chat(
        {"after_tool": True, "repeat": True, "content": "The sum is five."},
        {"match": "add", "repeat": True,
         "tool_calls": [{"name": "add_numbers", "arguments": {"a": 2, "b": 3}}]},
        {"repeat": True, "content": "Hello, nice to hear you."})


def measure(system: BenchSystem, proxy: DelayProxy, one_way_s: float, rounds: int
            ) -> tuple[dict[str, dict[float, list[tuple[float, float]]]], dict[float, float]]:
    found: dict[str, dict[float, list[tuple[float, float]]]] = {}
    rtt: dict[float, list[float]] = {0.0: [], one_way_s: []}
    for name, make in scenarios(system).items():
        for i in range(2):  # warm up: connections, caches
            _listener_timings(system, make, 1000 + i)
        arms: dict[float, list[tuple[float, float]]] = {0.0: [], one_way_s: []}
        for r in range(rounds):
            for delay in (0.0, one_way_s) if r % 2 == 0 else (one_way_s, 0.0):
                proxy.set_delay(delay)
                rtt[delay].append(measured_rtt_s(proxy, 20))
                arms[delay].append(_listener_timings(system, make, r * 2 + (delay > 0)))
        found[name] = arms
    proxy.set_delay(0.0)
    return found, {d: statistics.median(v) for d, v in rtt.items()}


def print_commands(system: BenchSystem, proxy: DelayProxy, scenario: str) -> None:
    """Every command one turn of ``scenario`` sends, in time order, by connection."""
    make = scenarios(system)[scenario]
    for i in range(3):  # warm: each process has loaded its scripts and opened its connections
        _listener_timings(system, make, 9990 + i)
    proxy.commands.clear()
    proxy.record = True
    started = time.time()
    _listener_timings(system, make, 9999)
    proxy.record = False
    names = script_names()
    for cmd in proxy.commands:
        said = " ".join(names.get(w.split(" ")[-1], w) if w.startswith("EVALSHA") else w
                        for w in cmd.words)
        print(f"{(cmd.at - started) * 1000:8.2f} ms  conn {cmd.conn:3d}  {said}")


def script_names() -> dict[str, str]:
    """Our Lua scripts by the first 8 hex digits of their SHA1: ``module:CONSTANT``."""
    import ast
    import hashlib

    found: dict[str, str] = {}
    for path in [*ROOT.glob("voxqueue/**/*.py"), *ROOT.glob("workers/**/*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
                    and isinstance(node.value.value, str) and "redis.call" in node.value.value):
                sha = hashlib.sha1(node.value.value.encode()).hexdigest()[:8]
                target = node.targets[0]
                name = target.id if isinstance(target, ast.Name) else "?"
                found[sha] = f"EVALSHA {path.stem}:{name}"
    return found


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=8, help="turns per scenario and delay")
    ap.add_argument("--one-way-ms", type=float, default=1.0)
    ap.add_argument("--commands", metavar="TURN", choices=["typed", "spoken", "tool"],
                    help="first print every command one turn of this kind sends")
    args = ap.parse_args(argv)
    one_way = args.one_way_ms / 1000
    with bench_system(INSTANT, separate_fake=True, processes=DEFAULT_PROCESSES,
                      via_proxy=True) as system:
        proxy = system.proxy
        assert proxy is not None
        script(system)
        if args.commands:
            print_commands(system, proxy, next(n for n in scenarios(system)
                                               if args.commands in n))
        found, rtt = measure(system, proxy, one_way, args.rounds)
    added_rtt_ms = (rtt[one_way] - rtt[0.0]) * 1000
    print(f"\nOne PING through the proxy: {rtt[0.0] * 1000:.2f} ms with no delay, "
          f"{rtt[one_way] * 1000:.2f} ms with {args.one_way_ms:g} ms each way "
          f"(+{added_rtt_ms:.2f} ms per round trip).\n")
    print(f"| turn | first audio, +0 / +{2 * args.one_way_ms:g} ms RTT | round trips | "
          f"whole turn, +0 / +{2 * args.one_way_ms:g} ms RTT | round trips |")
    print("|---|---|---|---|---|")
    for name, arms in found.items():
        cells: list[Any] = [name]
        for k in (0, 1):
            base = statistics.median(t[k] for t in arms[0.0])
            slow = statistics.median(t[k] for t in arms[one_way])
            cells += [f"{base:.0f} / {slow:.0f} ms", f"{(slow - base) / added_rtt_ms:.0f}"]
        print("| " + " | ".join(str(c) for c in cells) + " |")


if __name__ == "__main__":
    main()
