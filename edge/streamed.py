"""A command sent while it is spoken: frames to the server as they are captured, from a thread
of its own (the microphone loop never waits on the network), and the turn's partial
transcripts read back, so the device can end the command as soon as it is understood.

Opened when capture starts; frames are pushed as they come; ``end`` when the command is
complete, ``abort`` when it is dropped. Any failure (the server unreachable, a refusal) leaves
``turn`` empty: the device then sends the whole command as before.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from collections.abc import Callable
from typing import Any, Protocol

from voxqueue.client.direct import Turn

log = logging.getLogger("voxqueue.edge")


class Writer(Protocol):
    """``Client.stream`` or ``GatewayClient.stream``: what the command is written to."""

    @property
    def turn(self) -> Turn: ...

    def write(self, pcm: bytes) -> None: ...

    def end(self, spoken_until: float | None = None) -> Turn: ...

    def abort(self, reason: str = ...) -> None: ...


class StreamedCommand:
    """One command on its way to the server while it is spoken."""

    def __init__(self, open_writer: Callable[[], Writer], session: str) -> None:
        self.session = session
        self.turn: Turn | None = None
        self.error: Exception | None = None
        self.complete_until: float | None = None
        """Audio time (s from the stream's start) up to which the speech was understood as a
        complete command (the last ``stt-partial`` that said so)."""
        self.unfinished_until: float | None = None
        """Audio time up to which the speech was heard to stop mid-sentence ("set a timer
        for"), by the last ``stt-partial``."""
        self.sent_frames = 0
        self._open = open_writer
        self._items: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._done = threading.Event()
        self._abandoned = threading.Event()
        threading.Thread(target=self._run, name="edge-stream", daemon=True).start()

    def push(self, pcm: bytes, frames: int) -> None:
        """More captured audio (never blocks)."""
        self.sent_frames += frames
        self._items.put(pcm)

    def end(self, spoken_until: float | None) -> None:
        self._items.put(("end", spoken_until))

    def abort(self, reason: str) -> None:
        self._items.put(("abort", reason))

    def wait_turn(self, timeout: float) -> Turn | None:
        """The turn once the command has been ended at the server; None when it failed or
        took too long (then it is abandoned: dropped at the server whenever it gets there, so
        it never runs beside the whole command the device sends instead)."""
        if not self._done.wait(timeout):
            self.abandon("the device sent the command whole instead")
            return None
        return self.turn if self.error is None else None

    def abandon(self, reason: str) -> None:
        """The device will not use this command: drop it at the server (now, or whenever the
        stream gets there), and cancel its turn if it was already ended."""
        self._abandoned.set()
        self.abort(reason)
        if self.turn is not None:
            self.turn.cancel(reason)

    def _run(self) -> None:
        writer: Writer | None = None
        try:
            writer = self._open()
            watching = False
            while True:
                item = self._items.get()
                if isinstance(item, bytes):
                    writer.write(item)
                    if not watching:
                        watching = True
                        self._watch(writer.turn)
                    continue
                kind, value = item
                if kind == "end" and not self._abandoned.is_set():
                    self.turn = writer.end(value)
                else:
                    writer.abort(value if kind == "abort" else "abandoned by the device")
                return
        except Exception as exc:
            self.error = exc
            log.warning("edge: streaming the command failed (%s: %s); sending it whole",
                        exc.__class__.__name__, exc)
            if writer is not None:
                with contextlib.suppress(Exception):  # it may be gone already
                    writer.abort("the device's stream failed")
        finally:
            self._done.set()

    def _watch(self, turn: Turn) -> None:
        """Read the turn's partial transcripts in another thread, on a handle of its own."""
        handle = type(turn)(turn.client, turn.spec)

        def read() -> None:
            try:
                for entry in handle.events():
                    data = entry.event.data
                    if entry.event.type == "stt-partial":
                        at = float(data.get("at_s", 0.0))
                        self.complete_until = at if data.get("complete") else None
                        self.unfinished_until = at if data.get("unfinished") else None
                    if entry.event.type in ("stt-end", "run-end"):
                        return
            except Exception as exc:  # the partials only speed things up
                log.debug("edge: reading partial transcripts failed: %s", exc)

        threading.Thread(target=read, name="edge-partials", daemon=True).start()
