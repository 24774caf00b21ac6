"""The sweeper, on kombu's side: the one process at a time that sweeps, and how its channels
keep their in-flight lists alive (the sweeps themselves: :mod:`voxqueue.broker.sweeps`).

The sweeps of dead workers' messages (kombu's expired leases, our orphaned in-flight lists)
need doing once a second, not by every process: one process holds the sweeper's turn and sweeps
each second (:class:`SweepingTransport`), in one round trip (a script that renews its turn, puts
back dead channels' lists, and counts expired leases, which kombu's restore then puts back: its
own mutex and scan, three round trips more, only when there are some); the others try to take
the turn over with a take (in the same round trip as the channel's alive mark) at most every
:data:`TAKEOVER_S`, soon enough that a dead sweeper's own tasks still run again within a lease
and a second.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from time import monotonic
from typing import Any

from kombu.exceptions import InconsistencyError
from kombu.transport import redis as kombu_redis

from voxqueue.broker.sweeps import INFLIGHT_INDEX, hold_sweep_turn_in, restore_expired, sweep

log = logging.getLogger("voxqueue.broker")

#: How often a process that does not hold the sweeper's turn tries to take it over.
TAKEOVER_S = 2.5

#: How often kombu's refresh of expiring queues' bindings looks for work (kombu: each second;
#: the shortest such expiry here is Celery's control queues', 10 s, refreshed every third).
BINDING_CHECK_S = 3.0


class SweepingQoS(kombu_redis.QoS):
    def restore_visible(self, start: int = 0, num: int = 10, interval: int = 10) -> bool:
        """The sweeps that give a dead worker's messages back: kombu's (expired leases) and
        ours (in-flight lists of dead channels), when this process holds the sweeper's turn
        (taking it if free). Returns whether it does. kombu also calls this from a synchronous
        ``drain_events`` (a client's ``inspect``, say): a process that runs no event loop could
        not keep sweeping, so it never takes the turn (nor sweeps)."""
        channel = self.channel
        transport = channel.connection
        if not (isinstance(transport, SweepingTransport) and transport.sweeps_on_a_loop()):
            return False
        try:
            with channel.conn_or_acquire() as client:
                swept = sweep(client, channel._channel_id, channel.sweeper_hold_s,
                              unacked_index=self._index_key(),
                              lease_s=float(self.visibility_timeout),
                              limit=num)
        except InconsistencyError:
            return False
        if swept is None:
            return False
        returned, expired, ceiling = swept
        if returned:
            log.warning("%d message(s) of a dead worker's channel put back in their queue",
                        returned)
        if expired:  # kombu's restore (rare), but on Redis's clock
            restore_expired(self, ceiling, num)
        return True

    def _index_key(self) -> str:
        """``unacked_index`` as our scripts name it (kombu adds no global prefix to EVAL)."""
        return f"{self.channel.global_keyprefix or ''}{self.unacked_index_key}"


class SweepingChannel(kombu_redis.Channel):
    """A channel that marks its in-flight lists alive and tries for the sweeper's turn."""

    _turn_tried_at = -1e9

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        host = socket.gethostname().replace(".", "_")  # (no dots: see inflight_key)
        self._channel_id = f"{host}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self._alive_at = -1e9
        self.lease_s = float(self.visibility_timeout)
        every = float(self.unacked_restore_interval or 1)
        #: The sweeper's turn lapses after this without renewal (two sweeps missed, at most a
        #: third of the lease), and another process takes it over within ``TAKEOVER_S``:
        #: before a dead sweeper's own tasks are due to run again.
        self.sweeper_hold_s = min(2 * every, max(every, self.lease_s / 3))
        self.takeover_s = TAKEOVER_S

    def _keep_alive(self, keys: list[str]) -> None:
        """Mark this channel's in-flight lists alive for a lease (at most every quarter lease),
        and try for the sweeper's turn when due, in one round trip."""
        now = monotonic()
        mark = now - self._alive_at >= self.lease_s / 4
        trying = self._sweeper_turn_due(now)
        if mark or trying:
            self._mark_and_try_turn(keys if mark else [], trying=trying, now=now)

    def _sweeper_turn_due(self, now: float) -> bool:
        transport = self.connection
        return (now - self._turn_tried_at >= self.takeover_s
                and isinstance(transport, SweepingTransport) and transport.wants_sweeper_turn())

    def _mark_and_try_turn(self, alive_keys: list[str], *, trying: bool, now: float) -> None:
        """In one round trip: mark ``alive_keys`` alive and (``trying``) try for the sweeper's
        turn, as of ``now``; a turn taken starts this process's sweeps."""
        try:
            with self.conn_or_acquire() as client:
                pipe = client.pipeline(transaction=False)
                for key in alive_keys:
                    pipe.set(f"{key}.alive", b"1", px=int(self.lease_s * 1000))
                if alive_keys:
                    pipe.sadd(INFLIGHT_INDEX, *alive_keys)
                if trying:
                    hold_sweep_turn_in(pipe, "unacked", self._channel_id,
                                       self.sweeper_hold_s)
                replies = pipe.execute()
        except InconsistencyError:
            return
        if alive_keys:
            self._alive_at = now
        if trying:
            self._turn_tried_at = now
            if replies[-1]:
                self.connection.start_sweeping()


class SweepingTransport(kombu_redis.Transport):
    """kombu's transport, whose restore sweep (each ``unacked_restore_interval``) runs only
    while this process holds the sweeper's turn."""

    _loop: Any = None
    _sweep_every = 1.0

    def register_with_event_loop(self, connection: Any, loop: Any) -> None:
        super().register_with_event_loop(connection, loop)
        cycle: Any = self.cycle
        cycle._restore_messages_tref.cancel()
        cycle._restore_messages_tref = None  # (a sweep's timer, while this process sweeps)
        cycle._binding_expiry_tref.cancel()
        cycle._binding_expiry_tref = loop.call_repeatedly(
            BINDING_CHECK_S, cycle.maybe_refresh_binding_expiry)
        self._loop = loop
        self._sweep_every = float(
            connection.client.transport_options.get("unacked_restore_interval", 1))

    def sweeps_on_a_loop(self) -> bool:
        """Whether this process can sweep each second: it runs an event loop."""
        return self._loop is not None

    def wants_sweeper_turn(self) -> bool:
        """Whether this process could sweep and does not yet."""
        cycle: Any = self.cycle
        return self.sweeps_on_a_loop() and cycle._restore_messages_tref is None

    def start_sweeping(self) -> None:
        """Sweep each interval for as long as this process keeps the sweeper's turn."""
        if not self.wants_sweeper_turn():
            return
        cycle: Any = self.cycle
        loop = self._loop

        def sweep() -> None:
            held = False
            try:
                held = bool(cycle.maybe_restore_messages())
            finally:  # (kombu cancels this attribute's timer when it registers again)
                cycle._restore_messages_tref = (
                    loop.call_later(self._sweep_every, sweep) if held else None)

        sweep()  # the first one now (a timer set here would wait for the loop's next wake-up)
