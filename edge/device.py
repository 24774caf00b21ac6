"""The device: one audio loop for every source, turning what it hears into turns.

The loop runs the :class:`~edge.pipeline.Listener` on each 10 ms frame and reacts to what it
reports: a wake word (barge-in when something is being said), a complete command (a turn for
the :class:`~edge.responder.Responder`), silence after a wake word (nothing is sent). Between
turns it delivers what arrived unasked (announcements, connection notices) and, after a reply
that asked a question, listens once more without the wake word. It never waits on the network.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable

from edge.announcements import Announcement, AnnouncementListener, Feed, feed_for
from edge.capture import State
from edge.conversation import Conversation
from edge.display import Display
from edge.frames import FRAME_BYTES, FRAME_S
from edge.jobs import AnnounceJob, NoticeJob, TurnJob, TurnRecord
from edge.link import Link, redis_answers
from edge.pipeline import Listener, NoSpeech, Utterance, Woke
from edge.player import Player
from edge.responder import Responder
from edge.settings import EdgeSettings
from edge.sources import Source
from edge.streamed import StreamedCommand
from voxqueue.client.gateway import GatewayClient, connect_client
from voxqueue.redis_conn import redact
from voxqueue.settings import ClientSettings

log = logging.getLogger("voxqueue.edge")


class Device:
    """Listens on ``source``, talks through ``player``, reaches the server through Redis."""

    def __init__(
        self,
        edge: EdgeSettings,
        settings: ClientSettings,
        source: Source,
        player: Player,
        display: Display | None = None,
        *,
        announcements: bool = True,
        report: Callable[[TurnRecord], None] | None = None,
    ) -> None:

        self.edge = edge
        self.settings = settings
        self.report = report
        """Called with each command's record once it is done (``--json``)."""
        self.source = source
        self.display = display or Display()
        self.listener = Listener.from_settings(edge)
        self.client = connect_client(settings)
        self.redis_link = Link("redis", self._link_down, self._link_up)
        self.workers_link = Link("workers", self._link_down, self._link_up)
        self.responder = Responder(
            self.client,
            player,
            self.display,
            device=edge.device,
            deadline_s=edge.deadline_s,
            redis_link=self.redis_link,
            workers_link=self.workers_link,
            earcons=edge.earcons,
            probe=self._server_answers,
            on_turn_done=self._turn_done,
        )
        self._unasked: queue.Queue[AnnounceJob | NoticeJob] = queue.Queue()
        self._follow_up = threading.Event()
        self.conversation = Conversation(edge)
        self.streamed: StreamedCommand | None = None
        self.notices: list[str] = []
        self.announcements = (
            AnnouncementListener(self._feed(), self.redis_link, self._announcement)
            if announcements
            else None
        )

    def _feed(self) -> Feed:
        return feed_for(self.client, self.settings, self.edge.device)

    def _server_answers(self) -> bool:
        if isinstance(self.client, GatewayClient):
            return self.client.ping()
        return redis_answers(self.settings)

    @property
    def turns(self) -> list[TurnRecord]:
        return self.responder.turns

    # -- the loop ----------------------------------------------------------------------------
    def run(self) -> None:
        """Listen until the source ends (a file, stdin) or forever (the microphone)."""
        self.display.info(
            f"device {self.edge.device} listening for {' / '.join(self.listener.wake.names)}, "
            f"server {self.settings.gateway.url or redact(self.settings.redis.url)}"
        )
        self.responder.start()
        if self.announcements is not None:
            self.announcements.start()
        try:
            for frame in self.source.frames():
                self.step(frame)
            self._handle(self.listener.end_of_input())
            self.responder.wait_idle()  # the last reply plays out
        finally:
            self.close()

    def step(self, frame: bytes) -> None:
        """One 10 ms frame. A failure is reported and the capture dropped, never raised."""
        try:
            self._handle(self.listener.feed(frame))
            if (self.edge.stream and self.listener.capturing
                    and self.listener.capture.state is State.SPEECH):  # not before speech
                self._stream_capture()
            if not self.listener.capturing and not self.responder.busy:
                self._between_turns()
            if not self.source.live:  # a file read at full speed: let each reply finish
                self.responder.wait_idle()
        except Exception:
            log.exception("edge: frame processing failed; listening afresh")
            self.listener.capture.take()

    def close(self) -> None:
        self._drop_stream("the device stopped")
        if self.announcements is not None:
            self.announcements.close()
        self.responder.close()
        self.source.close()
        self.client.close()

    # -- streaming the command while it is spoken ---------------------------------------------
    def _stream_capture(self) -> None:
        """Send the frames captured since the last call; end the command at once when the
        server understood it and the speaker has paused since."""
        capture = self.listener.capture
        if self.streamed is None:
            session = self.conversation.session_id()
            self.streamed = StreamedCommand(lambda: self.client.stream(
                session=session, device=self.edge.device, deadline_s=self.edge.deadline_s),
                session)
        new = capture.frames[self.streamed.sent_frames:]
        if new:
            self.streamed.push(b"".join(new), len(new))
        spoken_until = len(capture.frames) * FRAME_S - capture.silence_s
        understood = self.streamed.complete_until
        if (understood is not None and self.edge.end_early_s > 0
                and capture.silence_s >= self.edge.end_early_s
                and spoken_until <= understood + 0.1):
            self._handle(self.listener.end_now("understood"))
            return
        hanging = self.streamed.unfinished_until
        capture.hold_for(self.edge.unfinished_wait_s if hanging is not None
                         and spoken_until <= hanging + 0.1 else None)

    def _drop_stream(self, why: str) -> None:
        if self.streamed is not None:
            self.streamed.abort(why)
            self.streamed = None

    # -- reactions ---------------------------------------------------------------------------
    def _handle(self, event: Woke | Utterance | NoSpeech | None) -> None:
        if event is None:
            return
        if isinstance(event, Woke):
            self._drop_stream("the wake word was heard again")
            self._follow_up.clear()
            barge_in = self.responder.interrupt("barge-in")
            d = event.detection
            self.display.line(
                f"[bold green]wake word[/] {d.phrase} [dim]at {d.at:.2f} s"
                f"{', barge-in' if barge_in else ''}"
                f"{', starting over' if event.restarted else ''}[/]"
            )
        elif isinstance(event, Utterance):
            live_lag = event.silence_s if self.source.live else 0.0
            if event.reason == "understood":
                self.display.info(f"command understood: ended after {event.silence_s:.2f} s "
                                  "of silence")
            streamed, self.streamed = self.streamed, None
            if streamed is not None:  # the rest of the command, then its end
                rest = event.pcm[streamed.sent_frames * FRAME_BYTES:]
                if rest:
                    streamed.push(rest, len(rest) // FRAME_BYTES)
                streamed.end(len(event.pcm) / (FRAME_BYTES / FRAME_S) - event.silence_s)
            self.responder.submit(
                TurnJob(
                    event.pcm,
                    time.time() - live_lag,
                    streamed.session if streamed else self.conversation.session_id(),
                    follow_up=event.wake is None,
                    streamed=streamed,
                    endpoint_wait_s=event.silence_s,
                )
            )
        else:
            self._drop_stream("no command was heard")
            self.display.info("no command heard" + (" (follow-up)" if event.follow_up else ""))

    def _between_turns(self) -> None:
        if self._follow_up.is_set():
            self._follow_up.clear()
            self.listener.follow_up(self.edge.follow_up_s)
            self.display.info(f"listening for {self.edge.follow_up_s:g} s (follow-up)")
            return
        try:
            job = self._unasked.get_nowait()
        except queue.Empty:
            return
        # A notice plays even when the outage ended meanwhile: the user is told once, always.
        self.responder.submit(job)

    # -- called from other threads ---------------------------------------------------------
    def _turn_done(self, record: TurnRecord) -> None:
        if self.report is not None:
            self.report(record)
        asked = (record.reply or "").rstrip().endswith("?")
        if record.status == "ok" and asked and not record.interrupted and self.edge.follow_up_s > 0:
            self._follow_up.set()

    def _announcement(self, item: Announcement) -> None:
        self._unasked.put(AnnounceJob(item))

    def _link_down(self, name: str, reason: str) -> None:
        text = (
            "Cannot reach the server; still listening, retrying."
            if name == "redis"
            else "The server's workers are not answering; still listening."
        )
        self.notices.append(f"{name} unreachable")
        log.warning("edge: %s unreachable: %s", name, reason)
        self.display.warn(text)
        self._unasked.put(NoticeJob("unreachable", ""))  # the sound waits for a quiet moment

    def _link_up(self, name: str) -> None:
        self.notices.append(f"{name} reachable")
        self.display.line(f"[green]{name} reachable again[/]")
