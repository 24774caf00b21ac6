"""Answering the user: runs turns, announcements and notices one at a time, in a thread.

The device's audio loop only hands jobs over and never waits on the network. A turn is
enqueued through the client API (claim check), its reply played chunk by chunk as it arrives
(``Turn.playback()``) and its stage events shown as they pass. ``interrupt()`` (barge-in) stops
the sound at once and cancels the running turn in every stage.

Also here (:class:`ShownTurn`): a turn whose events are shown on the device's display as they are
read.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from edge.announcements import Announcement
from edge.display import Display
from edge.earcons import earcon
from edge.frames import RATE
from edge.jobs import AnnounceJob, Job, TurnJob, TurnRecord
from edge.link import Link, is_connection_error
from edge.player import Played, Player
from voxqueue.client.direct import InputError, Turn
from voxqueue.client.gateway import AnyClient
from voxqueue.contracts import ErrorCode
from voxqueue.turns import StreamEntry


class ShownTurn(Turn):
    """A turn whose events are shown as they are read (also while its reply plays); it reads
    and cancels through the turn it wraps (Redis, or the gateway)."""

    def __init__(self, turn: Turn, show: Callable[[StreamEntry], None]) -> None:
        super().__init__(turn.client, turn.spec)
        self.inner = turn
        self._show = show
        self.seen: set[str] = set()
        """The event types read so far."""

    def _read(self, block_ms: int) -> list[StreamEntry]:
        self.inner._last_id = self._last_id
        return self.inner._read(block_ms)

    def _give_up(self) -> bool:
        return self.inner._give_up()

    def cancel(self, reason: str = "cancelled by the caller") -> bool:
        return self.inner.cancel(reason)

    def events(self, timeout: float | None = None) -> Iterator[StreamEntry]:
        shown = len(self._entries)
        for n, entry in enumerate(super().events(timeout=timeout)):
            if n >= shown:
                self.seen.add(entry.event.type)
                self._show(entry)
            yield entry


log = logging.getLogger("voxqueue.edge")

NO_ANSWER = "Sorry, there was no answer in time."

UNREACHABLE = "Sorry, I can't reach the server right now."


@dataclass
class _Running:
    job: Job
    stop: threading.Event = field(default_factory=threading.Event)
    turn: Turn | None = None


class Responder:
    """One background thread that speaks to the user, one job after another."""

    def __init__(
        self,
        client: AnyClient,
        player: Player,
        display: Display,
        *,
        device: str,
        deadline_s: float,
        redis_link: Link,
        workers_link: Link,
        earcons: bool = True,
        probe: Callable[[], bool] = lambda: True,
        on_turn_done: Callable[[TurnRecord], None] | None = None,
    ) -> None:
        self.client = client
        self.player = player
        self.display = display
        self.device = device
        self.deadline_s = deadline_s
        self.redis_link = redis_link
        self.workers_link = workers_link
        self.earcons = earcons
        self.on_turn_done = on_turn_done
        self.probe = probe
        """Asks Redis whether it answers now (used only while it is known to be down)."""
        self.turns: list[TurnRecord] = []
        self.announced: list[tuple[Announcement, Played | None]] = []
        self._jobs: deque[Job] = deque()
        self._current: _Running | None = None
        self._cond = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="edge-responder", daemon=True)

    # -- the device's side -------------------------------------------------------------------
    def start(self) -> None:
        self._thread.start()

    def submit(self, job: Job) -> None:
        with self._cond:
            self._jobs.append(job)
            self._cond.notify_all()

    @property
    def busy(self) -> bool:
        with self._cond:
            return self._current is not None or bool(self._jobs)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until nothing is queued or running; False on timeout."""
        with self._cond:
            return self._cond.wait_for(
                lambda: self._current is None and not self._jobs, timeout=timeout
            )

    def interrupt(self, reason: str = "barge-in") -> bool:
        """Stop what is being said now and cancel its turn. False when nothing was running."""
        with self._cond:
            running = self._current
            if running is None:
                return False
            running.stop.set()
            turn = running.turn
        if turn is not None:  # cancel off the audio loop: it never waits on Redis
            threading.Thread(target=self._cancel, args=(turn, reason), daemon=True).start()
        return True

    def close(self, timeout: float = 5.0) -> None:
        with self._cond:
            self._closed = True
            self._jobs.clear()
            self._cond.notify_all()
        self.interrupt("the device is stopping")
        self._thread.join(timeout)

    # -- the thread ----------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._closed or bool(self._jobs))
                if self._closed:
                    return
                running = self._current = _Running(self._jobs.popleft())
            try:
                self._do(running)
            except Exception:  # a bug must not stop the device from answering next time
                log.exception("edge: a job failed")
            finally:
                with self._cond:
                    self._current = None
                    self._cond.notify_all()

    def _do(self, running: _Running) -> None:
        job = running.job
        if isinstance(job, TurnJob):
            record = self._turn(job, running)
            self.turns.append(record)
            if self.on_turn_done is not None:
                self.on_turn_done(record)
        elif isinstance(job, AnnounceJob):
            self._announce(job.announcement, running)
        else:
            if job.text:
                self.display.warn(job.text)
            self._sound(job.sound, running.stop)

    def _turn(self, job: TurnJob, running: _Running) -> TurnRecord:
        record = TurnRecord(session=job.session, follow_up=job.follow_up)
        if not self._reachable():  # answer at once rather than after the client's retries
            if job.streamed is not None:  # it must not reach the server later on its own
                job.streamed.abandon("the server was unreachable when the command ended")
            record.status, record.error = "unsent", "Redis is unreachable"
            self.display.warn(UNREACHABLE)
            self._sound("sorry", running.stop)
            return record
        streamed = job.streamed.wait_turn(timeout=10) if job.streamed else None
        if streamed is None:
            self.display.info(f"sending {len(job.pcm) / (2 * RATE):.1f} s of speech")
        try:
            turn = self._attach(
                running,
                streamed or self.client.say(
                    job.pcm,
                    pcm_rate=RATE,
                    session=job.session,
                    device=self.device,
                    created_at=job.ended_at,
                    deadline_s=self.deadline_s,
                ),
            )
        except InputError as exc:
            record.status, record.error = "error", f"{exc.code}: {exc}"
            self.display.warn(f"not sent: {exc}")
            self._sound("sorry", running.stop)
            return record
        except Exception as exc:
            record.status, record.error = "unsent", f"{exc.__class__.__name__}: {exc}"
            self._unreachable(exc, running)
            return record
        record.turn_id = turn.turn_id
        self._play_turn(turn, f"turn-{turn.turn_id}", running, record)
        record.timings = _timings(job, turn, record)
        if record.interrupted:
            return record
        if record.status in ("timeout", "lost"):
            self.display.warn(NO_ANSWER)
            if not record.told:  # else the outage notice that follows says it
                self._sound("sorry", running.stop)
        elif record.status == "error" and not (record.played and record.played.bytes):
            self._sound("sorry", running.stop)  # the server could not even apologize
        return record

    def _announce(self, item: Announcement, running: _Running) -> None:
        self.display.line(f"[magenta]{item.kind}:[/] {item.text}")
        if item.pcm:
            played = self.player.play([item.pcm], f"announcement-{item.kind}", running.stop)
            self.announced.append((item, played))
            return
        record = TurnRecord(session="")
        if not self._reachable():
            self._sound("sorry", running.stop)
            self.announced.append((item, None))
            return
        try:
            turn = self._attach(
                running,
                self.client.speak(item.text, device=self.device, deadline_s=self.deadline_s),
            )
        except Exception as exc:
            self._unreachable(exc, running)
            self.announced.append((item, None))
            return
        self._play_turn(turn, f"announcement-{item.kind}", running, record)
        self.announced.append((item, record.played))
        if record.status != "ok" and not record.interrupted:
            self._sound("sorry", running.stop)

    # -- parts ---------------------------------------------------------------------------------
    def _attach(self, running: _Running, turn: Turn) -> ShownTurn:
        """Make the turn cancellable; cancel it at once when a barge-in came meanwhile."""
        self.redis_link.ok()
        shown = ShownTurn(turn, lambda e: self.display.turn_event(turn.turn_id, e.event))
        with self._cond:
            running.turn = shown
            stopped = running.stop.is_set()
        if stopped:
            self._cancel(shown, "barge-in")
        return shown

    def _play_turn(self, turn: ShownTurn, name: str, running: _Running, record: TurnRecord) -> None:
        try:
            record.played = self.player.play(turn.playback(), name, running.stop)
            if record.played.stopped:
                record.interrupted = True
                turn.wait(timeout=10)  # the cancel ends the turn: collect its run-end
        except Exception as exc:
            if is_connection_error(exc):
                record.told = self.redis_link.failed(f"{exc.__class__.__name__}: {exc}")
            else:
                log.exception("edge: playing turn %s failed", turn.turn_id)
            record.error = f"{exc.__class__.__name__}: {exc}"
        result = turn.result()
        record.transcript, record.reply = result.transcript, result.reply
        # Without its run-end the turn's fate is unknown here: the connection was lost.
        record.status = result.status if "run-end" in turn.seen else "lost"
        if result.error and result.error.get("code") == ErrorCode.REDIS_UNAVAILABLE:
            # The client ended the turn itself: Redis, not the workers, was the problem.
            record.told = self.redis_link.failed(result.error.get("message", "")) or record.told
        elif turn.seen - {"run-start", "error", "run-end", "cancelled"}:
            self.workers_link.ok()
        elif record.status == "timeout":
            record.told = self.workers_link.failed("no worker took the turn before its deadline")

    def _unreachable(self, exc: Exception, running: _Running) -> None:
        if not is_connection_error(exc):
            log.exception("edge: sending a turn failed", exc_info=exc)
            self.display.warn(f"not sent: {exc.__class__.__name__}: {exc}")
            self._sound("sorry", running.stop)
            return
        if not self.redis_link.failed(f"{exc.__class__.__name__}: {exc}"):
            # The outage was told already: just say that this command failed.
            self.display.warn(UNREACHABLE)
            self._sound("sorry", running.stop)

    def _reachable(self) -> bool:
        """False when Redis is known to be down and still does not answer."""
        if self.redis_link.up:
            return True
        if self.probe():
            self.redis_link.ok()
            return True
        return False

    def _sound(self, name: str, stop: threading.Event) -> None:
        if self.earcons:
            self.player.play([earcon(name)], f"earcon-{name}", stop)

    def _cancel(self, turn: Turn, reason: str) -> None:
        try:
            turn.cancel(reason)
        except Exception as exc:
            log.warning("edge: cancelling turn %s failed: %s", turn.turn_id, exc)


def _timings(job: TurnJob, turn: ShownTurn, record: TurnRecord) -> dict[str, float | None]:
    """What the person waited for, from the device's clock and the turn's events."""
    stt_end = next((e.event.ts for e in turn._entries if e.event.type == "stt-end"), None)
    first = record.played.first_at if record.played else None
    return {
        "speech_end_to_first_audio_ms": round((first - job.ended_at) * 1000, 1)
        if first else None,
        "endpoint_wait_ms": round(job.endpoint_wait_s * 1000, 1),
        "transcript_ms": round(max(0.0, stt_end - job.decided_at) * 1000, 1)
        if stt_end else None,
        "streamed": float(job.streamed is not None),
    }
