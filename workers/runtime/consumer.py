"""The worker's consumer, sending task events in batches.

Celery buffers task events (for Flower) and publishes the buffer at the next turn of the event
loop: on a busy worker that is one publish for every task or two, a tenth of its CPU. Here the
first buffered event schedules the publish ``EVENTS_FLUSH_S`` later, so the events of every task
that starts or ends meanwhile go out together; Flower shows a task at most that much later.
A full buffer (Celery's ``buffer_limit``) is still published at once, and the rest on shutdown.
"""

from __future__ import annotations

import time

from celery.worker.consumer import Consumer as CeleryConsumer

#: How long a task event may wait in the buffer for others to join it.
EVENTS_FLUSH_S = 0.25


class Consumer(CeleryConsumer):
    #: When the scheduled publish is due (0: none scheduled).
    _events_flush_due = 0.0

    def on_send_event_buffered(self) -> None:
        """Called (from any thread) when an event is buffered: schedule one publish."""
        if self.hub is None:
            return
        now = time.monotonic()
        if now < self._events_flush_due:
            return  # one is scheduled and will take this event too
        self._events_flush_due = now + EVENTS_FLUSH_S
        self.hub.call_soon(self._schedule_events_flush)  # timers belong to the loop's thread

    def _schedule_events_flush(self) -> None:
        self.hub.call_later(EVENTS_FLUSH_S, self._flush_events)
