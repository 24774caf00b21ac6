"""Reading a network stream in batches: each piece that has to be waited for wakes the reading
thread, so after a read that waited, a short pause lets the next pieces pile up and they are
read at once. Used where the listener has audio in hand to cover the pause: the voice's stream
(``workers/tts/chunking.py``) and the model's tokens once a sentence is out
(``workers/agent/speech.py``)."""

from __future__ import annotations

#: The longest pause before a read, and the shortest worth a sleep.
READ_PAUSE_S = 0.2
MIN_READ_PAUSE_S = 0.01
#: A read that took this long waited for its piece (a piece already there comes at once).
BLOCKED_READ_S = 0.002


def batch_pause(slack_s: float) -> float:
    """The pause before the next read when the listener can wait ``slack_s`` more: at most
    ``READ_PAUSE_S``; 0 when shorter than a sleep is worth."""
    pause = min(READ_PAUSE_S, slack_s)
    return pause if pause >= MIN_READ_PAUSE_S else 0.0
