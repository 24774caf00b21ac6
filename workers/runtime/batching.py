"""Reading a network stream in batches: each piece that has to be waited for wakes the reading
thread, so a short pause lets the next pieces pile up and they are read at once; the reader
pauses after a read that waited or once the pile is read (:class:`Arrival` says when), and
never for less than two pieces' interval. Used where the listener has audio in hand to cover
the pause: the voice's stream (``workers/tts/chunking.py``) and the model's tokens once a
sentence is out (``workers/agent/reply_sentences.py``)."""

from __future__ import annotations

#: The longest pause before a read, and the shortest worth a sleep.
READ_PAUSE_S = 0.2
MIN_READ_PAUSE_S = 0.01
#: A read that took this long waited for its piece (a piece already there comes at once).
BLOCKED_READ_S = 0.002
#: Pauses taken on the reckoned pace (:meth:`Arrival.drained`) before the reader reads until
#: a read waits again: a pace reckoned too low would otherwise hold the reader behind.
MAX_RECKONED_PAUSES = 2


def batch_pause(slack_s: float) -> float:
    """The pause before the next read when the listener can wait ``slack_s`` more: at most
    ``READ_PAUSE_S``; 0 when shorter than a sleep is worth."""
    pause = min(READ_PAUSE_S, slack_s)
    return pause if pause >= MIN_READ_PAUSE_S else 0.0


class Arrival:
    """How fast a stream's pieces arrive (in bytes, or one per token), measured at each read
    that had to wait for its piece (all that had arrived was read by then): tells when what
    piled up during a pause is all read, so the reader pauses again at once instead of first
    waiting on a read for the next piece, and how far apart pieces come (a pause shorter than
    two of them gathers nothing)."""

    def __init__(self) -> None:
        self.first_at: float | None = None
        self.first = 0  # the first piece's size (arrived at first_at)
        self.received = 0
        self.piece = 0  # the last piece's size
        self.rate: float | None = None  # size per second (bytes, or tokens)
        self.reckoned = 0  # pauses taken on the reckoning since the last read that waited

    def read(self, size: int, now: float, blocked: bool) -> None:
        """A piece of ``size`` read at ``now``; ``blocked``: the read waited for it."""
        if self.first_at is None:
            self.first_at, self.first = now, size
        elif blocked and now > self.first_at:
            self.rate = (self.received + size - self.first) / (now - self.first_at)
        self.received += size
        self.piece = size

    def pause(self, waited: bool, now: float, slack_s: float) -> float:
        """The pause before the next read, given whether the last one ``waited`` and that the
        listener can wait ``slack_s`` more: after a read that waited or once the pile is read,
        ``batch_pause(slack_s)``, unless shorter than two pieces' interval (0: no pause).

        The pile is reckoned read on the pace measured so far, which a stream that speeds up
        outruns: the reader would then read it at the old pace, behind the stream, since no
        read waits to measure it again. So after ``MAX_RECKONED_PAUSES`` such pauses in a row
        it reads until a read waits (the whole pile read, the pace measured anew)."""
        if waited:
            self.reckoned = 0
        elif self.reckoned >= MAX_RECKONED_PAUSES or not self.drained(now):
            return 0.0
        pause = batch_pause(slack_s)
        if pause < 2 * self.interval():
            return 0.0
        self.reckoned += not waited
        return pause

    def interval(self) -> float:
        """Seconds between pieces (0 until known)."""
        return self.piece / self.rate if self.rate else 0.0

    def drained(self, now: float) -> bool:
        """Whether all that has likely arrived by ``now`` is read (unknown: False)."""
        if self.rate is None or self.first_at is None:
            return False
        return self.received + self.piece > self.first + self.rate * (now - self.first_at)
