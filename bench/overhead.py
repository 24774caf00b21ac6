"""Queue overhead of one turn with instant fake providers.

    .venv/bin/python -m bench.overhead [--turns 30]

overhead = end-to-end time − time inside STT, LLM, tools and TTS, read from each turn's events.
"""

from __future__ import annotations

import argparse
import statistics

from bench.harness import bench_system, percentile, turn_breakdown
from testkit import SPEECH


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=30)
    args = parser.parse_args()
    with bench_system() as system:
        rows = []
        for i in range(args.turns + 2):
            system.fake.script_chat(
                {"tool_calls": [{"name": "calculate", "arguments": {"expression": "12*13"}}]},
                {"after_tool": True, "content": "Twelve times thirteen is 156."})
            turn = system.client.say(SPEECH / "command_multiply.wav", session=f"bench-{i}")
            result = turn.wait(timeout=60)
            assert result.status == "ok", result.error
            if i >= 2:  # the first turns warm the connections
                rows.append(turn_breakdown(turn._entries))
    hops = [h for r in rows for h in r["hops_ms"]]
    over = [r["overhead_ms"] for r in rows]
    print(f"turns: {len(rows)} (spoken question, 1 tool call, 2 LLM calls, 1 sentence of TTS)")
    print(f"hops per turn: {len(hops) // len(rows)}")
    print(f"end-to-end        p50 {statistics.median([r['e2e_ms'] for r in rows]):7.1f} ms")
    print(f"inside providers  p50 {statistics.median([r['inside_ms'] for r in rows]):7.1f} ms")
    print(f"queue overhead    p50 {statistics.median(over):7.1f} ms   "
          f"p95 {percentile(over, 95):7.1f} ms")
    print(f"per hop (enqueued → started)  p50 {statistics.median(hops):5.2f} ms   "
          f"p95 {percentile(hops, 95):5.2f} ms")


if __name__ == "__main__":
    main()
