"""What the same work costs right after a sleep, by the sleep's length, on this machine.

    .venv/bin/python -m bench.wake_tax [--rounds 5] [--bursts 60]

A burst is a slice of a turn's own work (a turn event validated from JSON and written back, a
chunk of audio appended); it runs ``--bursts`` times after each gap (0: back to back), the gaps
taking turns within each round. Prints the thread's CPU per burst (``time.thread_time``, not
wall time) by gap, medians over the rounds, and each as a multiple of back to back.

Why: #19 cut a turn's wake-ups by two thirds (reads in batches after pauses of up to 0.2 s,
fewer and larger writes), so a turn's work runs in fewer and colder bursts. If a burst after a
long sleep costs more than one that follows another (caches and branch predictors refilled after
whatever ran meanwhile: it stays with the cores kept busy, so it is not their idle state),
the saving depends on how busy the host is, which
is what ``bench.cpu_before_after`` showed: the same code at 27 ms a turn in one run and 54 ms
in another (``bench/cpu-per-turn-log.md``).
"""

from __future__ import annotations

import argparse
import statistics
import time

from voxqueue.contracts import TurnEvent

GAPS_S = (0.0, 0.001, 0.01, 0.05, 0.2)
EVENT = TurnEvent(type="tts-chunk", turn_id="t" * 32, data={
    "seq": 2, "idx": 5, "attempt": 1, "offset": 96000, "bytes": 32000}).model_dump_json()
PIECE = b"\x01\x02" * 1600  # 100 ms of 16 kHz 16-bit audio


def burst() -> int:
    """A slice of a turn's work: events parsed and written, audio gathered."""
    carry = b""
    n = 0
    for _ in range(20):
        event = TurnEvent.model_validate_json(EVENT)
        n += len(event.model_dump_json())
        carry += PIECE
    return n + len(carry)


def cpu_per_burst(gap_s: float, bursts: int) -> float:
    """Microseconds of this thread's CPU per burst, each burst after a sleep of ``gap_s``."""
    spent = 0.0
    for _ in range(bursts):
        if gap_s:
            time.sleep(gap_s)
        started = time.thread_time()
        burst()
        spent += time.thread_time() - started
    return spent / bursts * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--bursts", type=int, default=60, help="bursts per gap and round")
    args = parser.parse_args()
    burst()  # imports and first-call work out of the way
    runs: dict[float, list[float]] = {gap: [] for gap in GAPS_S}
    for round_ in range(args.rounds):
        order = GAPS_S if round_ % 2 == 0 else tuple(reversed(GAPS_S))
        for gap in order:
            runs[gap].append(cpu_per_burst(gap, args.bursts))
    base = statistics.median(runs[0.0])
    print(f"{args.rounds} rounds of {args.bursts} bursts per gap (medians)")
    print("| sleep before each burst | CPU µs per burst | × back to back | range over rounds |")
    print("|---|---|---|---|")
    for gap in GAPS_S:
        med = statistics.median(runs[gap])
        label = "none (back to back)" if not gap else f"{gap * 1000:g} ms"
        print(f"| {label} | {med:.0f} | {med / base:.2f} | "
              f"{min(runs[gap]):.0f}–{max(runs[gap]):.0f} |")


if __name__ == "__main__":
    main()
