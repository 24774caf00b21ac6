"""Driving a chaos run: a real system (redis-server, every queue's worker processes started as
``voxqueue up`` or ``voxqueue worker`` starts them, beat, the surprising fake providers),
concurrent sessions doing turns, a seeded killer SIGKILLing worker processes at random
instants, the restarts ``voxqueue up``'s supervisor makes, poison on every queue, and barge-in
while tools run. :func:`run_chaos` returns the ledger's :class:`Findings`.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from testkit.fakes.chaos_model import ChaosProviders, speech_with_transcript
from testkit.sentinel import MASTER, SentinelSet
from tests.conftest import SPEECH, System, system_env
from tests.reliability.chaos_ledger import (
    Findings,
    TurnRecord,
    check_effects,
    check_history,
    check_turn_ends,
    read_ledger,
    recorded_reply,
    spoken_problems,
)
from tests.tool_modules.chaos_tools import LEDGER_ENV
from voxqueue.audio import read_wav
from voxqueue.client.direct import Client
from voxqueue.settings import QUEUES
from voxqueue.up.child_process import Proc
from voxqueue.up.restarts import RestartPolicy

#: The environment variable that sets the seed (printed by every run).
SEED_ENV = "VOXQUEUE_CHAOS_SEED"
#: ``VOXQUEUE_CHAOS_POISON=0`` leaves the garbage out (to see the other figures while poison
#: still stops the workers; the test's forms always poison).
POISON_ENV = "VOXQUEUE_CHAOS_POISON"
#: Lost turns in a row after which a session stops (the system is down: the rest would be
#: lost too); the turns it did not run are a finding of their own.
DOWN_AFTER_LOST = 2
#: Worker processes per queue of the per-queue layout (the deployments', ``up --processes``):
#: ``DEFAULT_PROCESSES`` (agent 2, tts 3) with tools 2 and tts 2 (two cores run the whole
#: test).
PER_QUEUE = {"stt": 1, "agent": 2, "tools": 2, "tts": 2, "monitor": 1}
#: A queue's only live process is killed only once it has run this long (the time after which
#: ``voxqueue up`` counts it as started): the kills are of a system in service, not a crash loop
#: kept going (whose restarts back off, as `up`'s do, past the turns' deadlines: an outage, not
#: a loss).
LAST_ONE_MIN_UP_S = RestartPolicy().stable_s
#: ``voxqueue worker`` with no --queues, on two machines: each process consumes all five.
DEFAULT_NAME = "-".join(QUEUES)
PROFILE = {"stt_delay_s": 0.2, "llm_ttft_s": 0.05, "llm_tokens_per_s": 60.0,
           "tts_ttfb_s": 0.05, "tts_rtf": 1.0}
POISON = (b"\xffnot json at all", b'{"json": "but no message"}', b"[1, 2, 3]")


@dataclass(frozen=True)
class Plan:
    """What a run does; everything random in it is drawn from ``seed``."""

    seed: int
    layout: str  # "per-queue", "up" or "default"
    sessions: int
    turns: int  # per session, before the closing clean turn
    kills: int
    mean_gap_s: float  # exponential inter-arrival of the kills
    poison: bool = True
    audio_share: float = 0.25
    cancel_share: float = 0.2
    deadline_s: float = 30.0
    failovers: int = 0
    """Kills of the Redis primary (a :class:`testkit.sentinel.SentinelSet`), each followed by
    the killed server's restart as a replica, so the next one fails back."""


def poisons(plan: Plan) -> bool:
    """Whether the run puts garbage on the queues (the plan's, unless the env var says 0)."""
    return plan.poison and os.environ.get(POISON_ENV, "1") != "0"


def chosen_seed() -> int:
    """``$VOXQUEUE_CHAOS_SEED``, else a new one (printed, so a run can be replayed)."""
    raw = os.environ.get(SEED_ENV)
    return int(raw) if raw else random.SystemRandom().randrange(1, 10**6)


def queue_of(proc: Proc) -> str:
    name = proc.name.removeprefix("worker-")
    return "all" if name.startswith(DEFAULT_NAME) else name.split("-")[0]


def start_system(plan: Plan, redis_url: str, fake: ChaosProviders, ledger: Path,
                 log_dir: Path, redis_master: str | None = None) -> System:
    extra = {LEDGER_ENV: str(ledger)}
    if redis_master:
        extra["VOXQUEUE_REDIS_MASTER"] = redis_master
    env = system_env(redis_url, fake, VOXQUEUE_TOOL_MODULES="tests.tool_modules.chaos_tools",
                     **extra)
    system = System(env, log_dir)
    sup = system.sup
    if plan.layout == "per-queue":
        sup.start_workers(processes=PER_QUEUE)  # up --processes, compose's and Kubernetes'
    elif plan.layout == "up":
        sup.start_shared_worker()  # voxqueue up's default: one process for every queue
    else:
        for name in (DEFAULT_NAME, f"{DEFAULT_NAME}-2"):  # voxqueue worker's defaults
            sup.start(f"worker-{name}", sup.worker_argv(QUEUES, name=name, concurrency=8))
    sup.start("beat", sup.beat_argv())
    sup.wait_for_workers(QUEUES)
    return system


class Chaos:
    """The processes' keeper (restarts, from the thread that started them) and the killer."""

    def __init__(self, system: System, plan: Plan, found: Findings) -> None:
        self.system, self.plan, self.found = system, plan, found
        self.lock = threading.Lock()
        self.killed: set[int] = set()
        self.stop = threading.Event()
        self.log: list[str] = []
        system.sup.log = self.log.append
        self.workers = [p for p in system.sup.procs if p.name.startswith("worker-")]

    def killer(self) -> None:
        """SIGKILL a random worker process of a random queue at random instants (the whole
        process group) until ``plan.kills`` were killed; a pick that is down already is
        skipped, so the picks are the seed's whatever the timing."""
        rng = random.Random(f"{self.plan.seed}:kills")
        by_queue: dict[str, list[Proc]] = {}
        for proc in self.workers:
            by_queue.setdefault(queue_of(proc), []).append(proc)
        done = picks = 0
        while done < self.plan.kills and not self.stop.wait(
                rng.expovariate(1 / self.plan.mean_gap_s)):
            queue = rng.choice(sorted(by_queue))
            proc = rng.choice(by_queue[queue])
            picks += 1
            with self.lock:
                if (proc.restart_at is not None or proc.popen.poll() is not None
                        or proc.popen.pid in self.killed):
                    self.log.append(f"pick {picks}: {proc.name} is down already, skipped")
                    continue
                if self._last_up_of(by_queue[queue], proc) \
                        and time.monotonic() - proc.started < LAST_ONE_MIN_UP_S:
                    self.log.append(f"pick {picks}: {proc.name} is its queue's only live "
                                    "process and just started, skipped")
                    continue
                done += 1
                pid = proc.popen.pid
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
                self.killed.add(pid)
                self.found.kills[queue] += 1
                self.log.append(f"pick {picks}, kill {done}: {proc.name} pid {pid} at "
                                f"{time.time():.2f}")

    def _last_up_of(self, procs: list[Proc], proc: Proc) -> bool:
        """Whether ``proc`` is the only live process of its queue."""
        return not any(p is not proc and p.restart_at is None and p.popen.poll() is None
                       and p.popen.pid not in self.killed for p in procs)

    def keep(self) -> None:
        """What ``voxqueue up`` does every half second: notice deaths, restart with backoff;
        here also noting every death the killer did not cause."""
        with self.lock:
            for proc in self.workers:
                if proc.restart_at is None and proc.popen.poll() is not None \
                        and proc.popen.pid not in self.killed:
                    self.killed.add(proc.popen.pid)  # noted once
                    self.found.unplanned_exits.append(
                        f"{proc.name} pid {proc.popen.pid} exited by itself with "
                        f"{proc.popen.returncode}: {_tail(proc)}")
            self.system.sup.supervise_once()

    def all_up(self) -> bool:
        with self.lock:
            return all(p.restart_at is None and p.popen.poll() is None for p in self.workers)

    def keep_while(self, busy: Callable[[], bool]) -> None:
        while busy():
            self.keep()
            time.sleep(0.2)


class Failovers:
    """The killer of a Redis that fails over: SIGKILLs its primary at random instants, and
    after each failover starts the killed server again (it rejoins as a replica, so the next
    kill fails back); each gap is measured from the kill to a write through the sentinels."""

    def __init__(self, sentinels: SentinelSet, client: Client, plan: Plan,
                 found: Findings, log: list[str]) -> None:
        self.sentinels, self.client, self.plan, self.found = sentinels, client, plan, found
        self.log = log
        self.stop = threading.Event()
        self.killed_at: list[float] = []

    def run(self) -> None:
        rng = random.Random(f"{self.plan.seed}:failovers")
        for n in range(1, self.plan.failovers + 1):
            if self.stop.wait(rng.uniform(1.0, 2 * self.plan.mean_gap_s)):
                return
            killed = self.sentinels.kill_primary()
            down = time.monotonic()
            self.killed_at.append(down)
            self.log.append(f"failover {n}: primary :{killed.port} SIGKILLed at {time.time():.2f}")
            promoted = self.sentinels.wait_failover()
            self.found.failover_gaps.append(self._writable_after(down))
            self.log.append(f"failover {n}: :{promoted.port} promoted, writes back after "
                            f"{self.found.failover_gaps[-1]:.1f} s")
            self.sentinels.restart_killed()
            self.log.append(f"failover {n}: :{killed.port} rejoined as a replica")

    def _writable_after(self, down: float) -> float:
        """Seconds from the kill until a write through the sentinels succeeds."""
        while True:
            try:
                self.client.redis.set("chaos:failover-probe", str(time.time()))
                return time.monotonic() - down
            except Exception:  # the client's own retries ran out: try again
                time.sleep(0.1)


def _tail(proc: Proc) -> str:
    """The last critical line of the process's log (its own words for why it exited)."""
    if proc.log_path is None or not proc.log_path.exists():
        return ""
    lines = proc.log_path.read_text(errors="replace").splitlines()
    last = next((x for x in reversed(lines) if '"critical"' in x), lines[-1] if lines else "")
    with contextlib.suppress(ValueError, TypeError, AttributeError):
        last = str(json.loads(last).get("event"))
    return last[:200]


def poison(client: Client) -> None:
    """Garbage on every queue's list, as a bug or an operator's redis-cli would leave it."""
    for queue in QUEUES:
        client.redis.lpush(queue, *POISON)


def session_turns(client: Client, plan: Plan, s: int, records: list[TurnRecord],
                  errors: list[str], not_run: list[str], *, clean: bool) -> None:
    """One session's turns (or its closing clean turn), one after another; a cancelled turn is
    followed at once by the next."""
    rng = random.Random(f"{plan.seed}:session:{s}:{clean}")
    speech = read_wav((SPEECH / "command_time.wav").read_bytes(), max_bytes=10**7,
                      max_seconds=60).data
    session = f"chaos-{plan.seed}-{s}"
    lost_in_a_row = 0
    for i in range(1 if clean else plan.turns):
        if lost_in_a_row >= DOWN_AFTER_LOST:
            not_run.append(f"session {s}: turns {i}..{plan.turns - 1} not run, the last "
                           f"{lost_in_a_row} were lost")
            return
        index = plan.turns if clean else i
        tag = f"t{s}x{index}k{rng.getrandbits(32):08x}"
        text = f"Session {s} turn {index}: handle note {tag} please"
        audio = not clean and rng.random() < plan.audio_share
        cancel = not clean and rng.random() < plan.cancel_share
        try:
            turn = (client.say(speech_with_transcript(speech, text), pcm_rate=16000,
                               session=session, deadline_s=plan.deadline_s) if audio else
                    client.ask(text, session=session, deadline_s=plan.deadline_s))
            record = TurnRecord(turn.turn_id, session, index, "audio" if audio else "text",
                                tag, turn.spec.deadline, clean=clean)
            records.append(record)
            for entry in turn.events():
                if cancel and entry.event.type == "tool-start":
                    record.cancelled = turn.cancel("barge-in while tools run")
                    break
            lost = turn.done and turn.result().status == "timeout"
            lost_in_a_row = lost_in_a_row + 1 if lost else 0
        except Exception:  # the test fails on it, with the trace
            errors.append(f"session {s} turn {index}: {traceback.format_exc()}")


def run_sessions(client: Client, plan: Plan, chaos: Chaos, records: list[TurnRecord],
                 errors: list[str], *, clean: bool) -> None:
    threads = [threading.Thread(target=session_turns,
                                args=(client, plan, s, records, errors, chaos.found.not_run),
                                kwargs={"clean": clean}, name=f"chaos-session-{s}", daemon=True)
               for s in range(plan.sessions)]
    for t in threads:
        t.start()
    chaos.keep_while(lambda: any(t.is_alive() for t in threads))


def run_chaos(plan: Plan, redis_url: str, work: Path, *,
              sentinels: SentinelSet | None = None) -> tuple[Findings, list[str], str]:
    """Run ``plan``; the findings, the harness's own errors, and the keeper's log. With
    ``sentinels``, ``redis_url`` is their URL and the plan's failovers kill its primary."""
    found = Findings()
    ledger = work / "effects.jsonl"
    fake = ChaosProviders(plan.seed, profile=PROFILE)
    fake.start()
    system = start_system(plan, redis_url, fake, ledger, work / "logs",
                          redis_master=MASTER if sentinels is not None else None)
    records: list[TurnRecord] = []
    errors: list[str] = []
    try:
        client = system.client()
        chaos = Chaos(system, plan, found)
        killer = threading.Thread(target=chaos.killer, name="chaos-killer", daemon=True)
        killer.start()
        failovers = None
        if plan.failovers:
            assert sentinels is not None, "failovers need a Redis with sentinels"
            failovers = Failovers(sentinels, client, plan, found, chaos.log)
            failing_over = threading.Thread(target=failovers.run, name="chaos-failovers",
                                            daemon=True)
            failing_over.start()
        if poisons(plan):
            timer = threading.Timer(random.Random(f"{plan.seed}:poison").uniform(2, 8),
                                    poison, args=(client,))
            timer.daemon = True
            timer.start()
        run_sessions(client, plan, chaos, records, errors, clean=False)
        sessions_ended = time.monotonic()
        chaos.stop.set()
        killer.join()
        if failovers is not None:
            failovers.stop.set()
            failing_over.join(90)  # the last killed server rejoins before the clean turns
            under_turns = sum(t < sessions_ended for t in failovers.killed_at)
            if under_turns < plan.failovers:
                found.not_run.append(f"{under_turns} of {plan.failovers} failovers happened "
                                     "while the sessions ran")
        give_up = time.time() + 60
        chaos.keep_while(lambda: not chaos.all_up() and time.time() < give_up)
        if not chaos.all_up():
            found.not_run.append("the workers were not all up 60 s after the last kill")
        run_sessions(client, plan, chaos, records, errors, clean=True)
        time.sleep(1.0)  # late writes of killed attempts land before the ledger reads
        chaos.keep()
        audit(client, records, ledger, found)
        return found, errors, "\n".join(chaos.log)
    finally:
        system.stop()
        fake.stop()


def turn_state(client: Client, turn_id: str) -> str:
    """What Redis holds of a turn (its keys, and the broker's records of its jobs): the
    evidence of a lost turn."""
    r = client.redis
    lines = []
    for key in sorted(r.scan_iter(match=f"*{turn_id}*", count=1000)):
        name = key.decode() if isinstance(key, bytes) else str(key)
        kind = r.type(key)
        kind = kind.decode() if isinstance(kind, bytes) else str(kind)
        value: object
        if kind == "hash":
            value = {k: (v[:60] if len(v) > 60 else v) for k, v in r.hgetall(key).items()}
        elif kind == "set":
            value = sorted(r.smembers(key))
        elif kind == "list":
            value = r.lrange(key, 0, 5)
        elif kind == "stream":
            value = [json.loads(f[b"e"]).get("type") for _, f in r.xrange(key) if b"e" in f]
        else:
            value = r.get(key)
        lines.append(f"  {name} ({kind}): {value}")
    for key in r.scan_iter(match="unacked*", count=1000):
        for tag, raw in r.hscan_iter(key):
            if turn_id.encode() in raw:
                lines.append(f"  {key!r} holds {tag!r}: {raw[:120]!r}")
    for name in QUEUES:
        for raw in r.lrange(name, 0, -1):
            if turn_id.encode() in raw:
                lines.append(f"  queue {name} holds {raw[:120]!r}")
    return "\n".join(lines)


def audit(client: Client, records: list[TurnRecord], ledger: Path, found: Findings) -> None:
    """Read back every turn's stream, every history and the effect file; check them all."""
    histories = {}
    for session in sorted({r.session for r in records}):
        raw = client.redis.lrange(client.keys.messages(session), 0, -1)
        histories[session] = [json.loads(m) for m in raw]
    for rec in records:
        rec.entries = list(client.store.history(rec.turn_id))
        found.turns += 1
        found.cancelled += int(rec.cancelled)
        check_turn_ends(found, rec)
        ok = rec.status() == "ok"
        problems = spoken_problems(rec, recorded_reply(histories[rec.session], rec.tag)) \
            if ok else []
        where = f"turn {rec.turn_id} (session {rec.session} #{rec.index}, {rec.kind})"
        if found.lost and found.lost[-1].startswith(f"turn {rec.turn_id}"):
            found.lost_states.append(f"{where}:\n{turn_state(client, rec.turn_id)}")
        if problems:
            found.spoken_not_recorded.append(f"{where}: {problems}")
        if rec.clean and (not ok or problems):
            found.next_turn_broken.append(f"{where}: status {rec.status()}, {problems}")
    for session, history in histories.items():
        check_history(found, session, history)
    check_effects(found, histories, read_ledger(ledger))
