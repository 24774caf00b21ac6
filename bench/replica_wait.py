"""What following a primary through Redis Sentinel costs a turn, and what waiting for a
replica adds: the same turns through a Redis reached directly, through its sentinels, and
through its sentinels with durable writes waiting for the replica (``WAIT``, the default with
sentinels), alternating.

    ./vq bench replica_wait [--turns 30]

A primary, a replica and three sentinels; three systems of workers on three databases of that
Redis; turns alternate between them (one at a time, instant fake providers, a tool call, two
LLM calls, one sentence of TTS). Printed: each side's end-to-end and queue overhead, their
ratios to the direct side, and the ``WAIT`` commands per turn (the primary's command counts).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import redis

from bench.harness import percentile, turn_breakdown
from testkit import SPEECH, system_env
from testkit.fakes import FakeProviders
from testkit.sentinel import MASTER, SentinelSet
from voxqueue.client.direct import Client
from voxqueue.settings import QUEUES, RedisSettings, Settings
from voxqueue.up.supervisor import Supervisor

#: The sides: (name, through the sentinels, replicas a durable write waits for).
SIDES = (("direct", False, 0), ("sentinels", True, 0), ("sentinels + WAIT", True, 1))


@contextmanager
def side(sentinels: SentinelSet, fake: Any, db: int, via_sentinels: bool,
         replicas: int) -> Iterator[Client]:
    """The workers of one side (one per queue) on database ``db``, and a client of it."""
    url = (sentinels.url.rsplit("/", 1)[0] + f"/{db}" if via_sentinels
           else f"redis://127.0.0.1:{sentinels.primary().port}/{db}")
    master = MASTER if via_sentinels else ""
    env = system_env(url, fake, VOXQUEUE_LOG_LEVEL="WARNING", VOXQUEUE_REDIS_MASTER=master,
                     VOXQUEUE_REDIS_WAIT_REPLICAS=str(replicas))
    settings = Settings(redis=RedisSettings(url=url, master=master or None,
                                            wait_replicas=replicas))
    sup = Supervisor(settings, env=env, log_dir=Path(tempfile.mkdtemp(prefix="vq-bench-")))
    try:
        sup.start_workers(queues=QUEUES)
        sup.wait_for_workers(QUEUES, timeout=120)
        with Client(settings) as client:
            yield client
    finally:
        sup.stop_all()


def waits_done(sentinels: SentinelSet) -> int:
    stats: Any = redis.Redis(port=sentinels.primary().port).info("commandstats")
    return int(stats.get("cmdstat_wait", {}).get("calls", 0))


def one_turn(client: Client, fake: Any, n: int) -> dict[str, Any]:
    fake.script_chat(
        {"tool_calls": [{"name": "calculate", "arguments": {"expression": "12*13"}}]},
        {"after_tool": True, "content": "Twelve times thirteen is 156."})
    turn = client.say(SPEECH / "command_multiply.wav", session=f"bench-{n}")
    result = turn.wait(timeout=60)
    assert result.status == "ok", result.error
    return turn_breakdown(turn._entries)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=30)
    args = parser.parse_args()
    sentinels = SentinelSet()
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name, *_ in SIDES}
    waits = dict.fromkeys(rows, 0)
    try:
        with ExitStack() as stack:
            fake = stack.enter_context(FakeProviders())
            clients = {name: stack.enter_context(side(sentinels, fake, db, via, replicas))
                       for db, (name, via, replicas) in enumerate(SIDES, start=1)}
            for n in range(args.turns + 2):
                order = list(rows)[n % len(rows):] + list(rows)[:n % len(rows)]
                for name in order:
                    before = waits_done(sentinels)
                    row = one_turn(clients[name], fake, n)
                    if n >= 2:  # the first turns warm the connections
                        rows[name].append(row)
                        waits[name] += waits_done(sentinels) - before
    finally:
        sentinels.stop()
    print(f"turns per side: {args.turns} (spoken question, 1 tool call, 2 LLM calls, "
          "1 sentence of TTS), in turn; a primary, a replica, three sentinels")
    print(f"{'':26}" + "".join(f"{name:>18}" for name in rows))
    for key, label, stat in (("e2e_ms", "end to end p50 (ms)", statistics.median),
                             ("overhead_ms", "queue overhead p50 (ms)", statistics.median),
                             ("overhead_ms", "queue overhead p95 (ms)",
                              lambda xs: percentile(list(xs), 95))):
        values = {name: stat([r[key] for r in rows[name]]) for name in rows}
        print(f"{label:26}" + "".join(f"{values[name]:>18.1f}" for name in rows))
        print(f"{'  ratio to direct':26}"
              + "".join(f"{values[name] / values['direct']:>18.2f}" for name in rows))
    print(f"{'WAIT commands per turn':26}"
          + "".join(f"{waits[name] / args.turns:>18.1f}" for name in rows))


if __name__ == "__main__":
    main()
