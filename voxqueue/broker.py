"""kombu's Redis transport, with two fixes (a crash on reconnection, a message lost by a worker
killed while taking it) and one saving (a client per connection pool, not per operation).

**Taking a message.** kombu takes a message with ``BRPOP`` and only then, in the worker, adds
it to its ``unacked`` set. A worker killed between the two (the reply read off the socket, or
still in it, waiting for a busy interpreter) loses the message: it is in no queue and in no
set. A channel that consumes one queue (every worker ``voxqueue up``, compose and Kubernetes
run) takes it with ``BLMOVE queue inflight`` instead: Redis moves it, atomically, into a list
of that channel's own, and moves it from there into ``unacked`` in one transaction. The channel
marks itself alive at each take; a list whose channel stopped doing so for a lease is put back
in its queue by the sweeper (:func:`voxqueue.broker_sweeps.sweep`, with kombu's restore). A
channel on several queues keeps kombu's ``BRPOP`` (one ``BLMOVE`` waits on one list only).

**Idle workers sleep.** An idle worker's cost is its wake-ups, so a take waits up to
:data:`TAKE_WAIT_S` for a message (kombu's ``BRPOP``: 1 s), and a channel that closes while
taking drops the take's connection and puts back what it moved, instead of waiting for the
reply. The sweeps of dead workers' messages (kombu's expired leases, our orphaned in-flight
lists) need doing once a second, not by every process: one process holds the sweeper's turn
and sweeps each second (:class:`Transport`), in one round trip (a script that renews its turn,
puts back dead channels' lists, and counts expired leases, which kombu's restore then puts
back: its own mutex and scan, three round trips more, only when there are some); the others
try to take the turn over with a take (in the same round trip as the channel's alive mark) at
most every :data:`TAKEOVER_S`, soon enough that a dead sweeper's own tasks still run again
within a lease and a second.

**Reconnection.** When the broker connection drops, a channel already released by its
connection may still be used: to restore its unacknowledged messages while closing, or to
acknowledge a task that finished meanwhile. kombu 5.7 then fails with ``AttributeError`` (no
connection parameters), which Celery treats as unrecoverable, and the worker exits. Raising a
connection error instead lets Celery do what it does for any connection error: log it and
reconnect. The message stays in kombu's ``unacked`` set and comes back after the visibility
timeout; every stage is idempotent, so running it again only finds its turn already done.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from queue import Empty
from time import monotonic
from typing import Any, cast

import redis
from kombu.exceptions import InconsistencyError
from kombu.transport import redis as kombu_redis
from kombu.transport import virtual
from kombu.utils.encoding import bytes_to_str
from kombu.utils.json import dumps, loads

from voxqueue.broker_sweeps import (
    INFLIGHT_INDEX,
    give_back,
    hold_sweep_turn_in,
    inflight_key,
    restore_expired,
    stamp_leases,
    sweep,
)

__all__ = ["INFLIGHT_INDEX", "TAKEOVER_S", "TAKE_WAIT_S", "Channel", "QoS", "Transport",
           "hold_sweep_turn_in", "inflight_key", "sweep"]

log = logging.getLogger("voxqueue.broker")

#: Longest wait of one take (``BLMOVE``) for a message; at most half the lease, since the
#: channel marks itself alive for a lease as each take begins.
TAKE_WAIT_S = 2.5

#: How often a process that does not hold the sweeper's turn tries to take it over.
TAKEOVER_S = 2.5

#: How often kombu's refresh of expiring queues' bindings looks for work (kombu: each second;
#: the shortest such expiry here is Celery's control queues', 10 s, refreshed every third).
BINDING_CHECK_S = 3.0


class QoS(kombu_redis.QoS):
    def restore_visible(self, start: int = 0, num: int = 10, interval: int = 10) -> bool:
        """The sweeps that give a dead worker's messages back: kombu's (expired leases) and
        ours (in-flight lists of dead channels), when this process holds the sweeper's turn
        (taking it if free). Returns whether it does. kombu also calls this from a synchronous
        ``drain_events`` (a client's ``inspect``, say): a process that runs no event loop could
        not keep sweeping, so it never takes the turn (nor sweeps)."""
        channel = self.channel
        transport = channel.connection
        if not (isinstance(transport, Transport) and transport.sweeps_on_a_loop()):
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

    def append(self, message: Any, delivery_tag: Any) -> None:
        """kombu's record of a delivered message (``unacked``), its lease stamped with Redis's
        time (kombu's uses this host's); for a message taken into this channel's in-flight
        list, with its removal from that list in the same transaction: the message is in
        exactly one of the two at every moment, for one round trip."""
        taking = self.channel._taking
        self.channel._taking = None
        delivery = message.delivery_info
        with self.pipe_or_acquire() as pipe:
            stamp_leases(pipe, self._index_key(), [delivery_tag], renew=False)
            pipe.hset(self.unacked_key, delivery_tag,
                      dumps([message._raw, delivery["exchange"], delivery["routing_key"]]))
            if taking is not None:
                pipe.lrem(taking[0], 1, taking[1])
            pipe.execute()
        virtual.QoS.append(self, message, delivery_tag)


class Channel(kombu_redis.Channel):
    QoS = QoS
    #: The in-flight list and the message being delivered from it (see ``QoS.append``).
    _taking: tuple[str, bytes] | None = None
    _inflight_queue: str | None = None
    _sync_client: tuple[Any, Any] | None = None
    _turn_tried_at = -1e9

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._channel_id = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self._alive_at = -1e9
        self.lease_s = float(self.visibility_timeout)
        self.take_wait_s = min(TAKE_WAIT_S, self.lease_s / 2)
        every = float(self.unacked_restore_interval or 1)
        #: The sweeper's turn lapses after this without renewal (two sweeps missed, at most a
        #: third of the lease), and another process takes it over within ``TAKEOVER_S``:
        #: before a dead sweeper's own tasks are due to run again.
        self.sweeper_hold_s = min(2 * every, max(every, self.lease_s / 3))
        self.takeover_s = TAKEOVER_S

    # -- one client per pool ----------------------------------------------------------------
    def _create_client(self, asynchronous: bool = False) -> Any:
        """kombu builds a new ``redis.Redis`` for every synchronous operation (each ack, each
        event, each restore sweep): a tenth of a busy worker's time went there. A client is
        only a handle on its connection pool, and safe across threads, so one per pool does;
        a reconnection makes a new pool, and with it a new client."""
        if asynchronous:
            return super()._create_client(asynchronous=True)
        pool = self.pool
        cached = self._sync_client
        if cached is None or cached[0] is not pool:
            cached = self._sync_client = (pool, super()._create_client(asynchronous=False))
        return cached[1]

    def _connparams(self, *args: Any, **kwargs: Any) -> Any:
        if self.connection is None or self.connection.client is None:
            raise redis.ConnectionError("the broker channel was closed by a reconnection")
        return super()._connparams(*args, **kwargs)

    # -- taking a message without a gap ---------------------------------------------------------
    def _brpop_start(self, timeout: Any = None) -> None:
        queues = list(dict.fromkeys(self.active_queues))
        if len(queues) != 1 or self.global_keyprefix or self.priority_steps != [0]:
            self._inflight_queue = None
            if self._sweeper_turn_due(now := monotonic()):
                self._mark_and_try_turn(None, trying=True, now=now)
            return super()._brpop_start(timeout)
        queue = queues[0]
        key = inflight_key(queue, self._channel_id)
        self._keep_alive(key)
        self._inflight_queue = queue
        self._in_poll = self.client.connection
        self._brpop_sent_at = monotonic()  # type: ignore[assignment]
        wait = self.take_wait_s if timeout is None else timeout
        self.client.connection.send_command("BLMOVE", queue, key, "RIGHT", "LEFT", wait or 0)

    def _brpop_read(self, **options: Any) -> Any:
        queue = self._inflight_queue
        if queue is None:
            return super()._brpop_read(**options)
        try:
            try:
                item = self.client.parse_response(self.client.connection, "BLMOVE", **options)
            except self.connection_errors:
                self.client.connection.disconnect()
                raise
            if not item:
                raise Empty()
            self._taking = (inflight_key(queue, self._channel_id), item)
            self.connection._deliver(loads(bytes_to_str(item)), queue)  # now in unacked
            if self._taking is not None:  # not recorded by QoS.append (a no-ack consumer)
                key, raw = self._taking
                with self.conn_or_acquire() as client:
                    client.lrem(key, 1, raw)
            return True
        finally:
            self._taking = None
            self._in_poll = None  # type: ignore[assignment]
            self._flush_brpop_reauth()

    def close(self) -> None:
        """kombu reads a pending take's reply before closing: up to a take's wait. A pending
        ``BLMOVE`` is dropped instead (see ``_drop_take``)."""
        self._drop_take()
        super().close()

    def _basic_cancel(self, consumer_tag: str) -> Any:
        """A take pending on a queue no longer consumed is dropped: else the channel's next
        take, of another queue, waits behind it (a client's ``inspect``, which consumes a new
        reply queue each time, missed every other answer)."""
        answer = super()._basic_cancel(consumer_tag)
        if self._inflight_queue is not None and self._inflight_queue not in self.active_queues:
            self._drop_take()
        return answer

    def _drop_take(self) -> None:
        """Drop a pending ``BLMOVE`` with its connection (the channel's next take connects
        again), and put back in its queue now whatever it moved already (else the lease
        would, later)."""
        queue, connection = self._inflight_queue, cast(Any, self._in_poll)
        if connection and queue is not None:
            self._in_poll = None  # type: ignore[assignment]
            self._inflight_queue = None
            try:
                connection.disconnect()
                with self.conn_or_acquire() as client:
                    give_back(client, queue, self._channel_id)
            except (InconsistencyError, redis.RedisError, OSError) as exc:
                log.info("in-flight list left to the lease sweep: %s", exc)

    def _keep_alive(self, key: str) -> None:
        """Mark this channel's in-flight list alive for a lease (at most every quarter lease),
        and try for the sweeper's turn when due, in one round trip."""
        now = monotonic()
        mark = now - self._alive_at >= self.lease_s / 4
        trying = self._sweeper_turn_due(now)
        if mark or trying:
            self._mark_and_try_turn(key if mark else None, trying=trying, now=now)

    def _sweeper_turn_due(self, now: float) -> bool:
        transport = self.connection
        return (now - self._turn_tried_at >= self.takeover_s
                and isinstance(transport, Transport) and transport.wants_sweeper_turn())

    def _mark_and_try_turn(self, alive_key: str | None, *, trying: bool, now: float) -> None:
        """In one round trip: mark ``alive_key`` alive (if given) and (``trying``) try for the
        sweeper's turn, as of ``now``; a turn taken starts this process's sweeps."""
        try:
            with self.conn_or_acquire() as client:
                pipe = client.pipeline(transaction=False)
                if alive_key is not None:
                    pipe.set(f"{alive_key}.alive", b"1", px=int(self.lease_s * 1000))
                    pipe.sadd(INFLIGHT_INDEX, alive_key)
                if trying:
                    hold_sweep_turn_in(pipe, "unacked", self._channel_id,
                                       self.sweeper_hold_s)
                replies = pipe.execute()
        except InconsistencyError:
            return
        if alive_key is not None:
            self._alive_at = now
        if trying:
            self._turn_tried_at = now
            if replies[-1]:
                self.connection.start_sweeping()


class Transport(kombu_redis.Transport):
    """kombu's transport, its channels taking messages as above. kombu's restore sweep, each
    ``unacked_restore_interval``, runs only while this process holds the sweeper's turn."""

    Channel = Channel
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
