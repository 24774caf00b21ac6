"""kombu's Redis transport, with two fixes (a crash on reconnection, a message lost by a worker
killed while taking it) and one saving (a client per connection pool, not per operation).

**Taking a message.** kombu takes a message with ``BRPOP`` and only then, in the worker, adds
it to its ``unacked`` set. A worker killed between the two (the reply read off the socket, or
still in it, waiting for a busy interpreter) loses the message: it is in no queue and in no
set. Every channel here takes it into a list of that channel's own instead, atomically in
Redis, and moves it from there into ``unacked`` in one transaction: a channel that consumes one
list with ``BLMOVE queue inflight``; one that consumes several (``voxqueue worker``'s default,
every queue; plain ``celery -A workers worker``; several priority steps) with a script that
moves the first item of the first non-empty list, waiting on the lists' doorbells when all are
empty (:mod:`voxqueue.broker.take`). The channel marks its in-flight lists alive at each take;
a list whose channel stopped doing so for a lease is put back in its queue by the sweeper
(:func:`voxqueue.broker.sweeps.sweep`, with kombu's restore). An item that is not a message
kombu can deliver (not JSON, say) goes from the in-flight list to the dead letters in one step
(:mod:`voxqueue.broker.dead_letters`), and the worker goes on. ``global_keyprefix`` is refused: the
take's and the sweeps' keys are not prefixed.

**Idle workers sleep.** An idle worker's cost is its wake-ups, so a take waits up to
:data:`TAKE_WAIT_S` for a message (kombu's ``BRPOP``: 1 s; the take from several lists: one
script and one ``XREAD`` per wait), and a channel that closes while taking drops the take's
connection and puts back what it moved, instead of waiting for the reply. One process at a
time sweeps (:mod:`voxqueue.broker.sweeper`).

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
from queue import Empty
from time import monotonic
from typing import Any, cast

import redis
from kombu.exceptions import InconsistencyError
from kombu.transport import redis as kombu_redis
from kombu.transport import virtual
from kombu.utils.encoding import bytes_to_str
from kombu.utils.json import dumps, loads

from voxqueue.broker import take as broker_take
from voxqueue.broker.dead_letters import bury
from voxqueue.broker.sweeper import TAKEOVER_S, SweepingChannel, SweepingQoS, SweepingTransport
from voxqueue.broker.sweeps import (
    INFLIGHT_INDEX,
    give_back,
    hold_sweep_turn_in,
    inflight_key,
    stamp_leases,
    sweep,
)
from voxqueue.broker.take import ring_commands, take_any_command, taken, wait_command
from voxqueue.redis_conn import PrimaryConnection, QuorumSentinel, ReplicaWait

__all__ = ["INFLIGHT_INDEX", "TAKEOVER_S", "TAKE_WAIT_S", "Channel", "QoS", "Transport",
           "hold_sweep_turn_in", "inflight_key", "sweep"]

log = logging.getLogger("voxqueue.broker")

#: Longest wait of one take (``BLMOVE``) for a message; at most half the lease, since the
#: channel marks itself alive for a lease as each take begins.
TAKE_WAIT_S = 2.5

#: Why a channel with ``global_keyprefix`` refuses to open.
NO_KEYPREFIX = ("voxqueue's broker (voxqueue.broker.transport:Transport) does not support the "
                "transport option global_keyprefix: its lossless take and its sweeps use keys "
                "without the prefix. Give voxqueue a Redis database of its own instead "
                "(VOXQUEUE_REDIS_URL=redis://host:6379/N) and remove global_keyprefix.")


class Message(virtual.Message):
    """kombu's message, noting on its channel that what it took is one (see
    ``Channel._deliver_taken``)."""

    def __init__(self, payload: Any, channel: Any = None, **kwargs: Any) -> None:
        super().__init__(payload, channel=channel, **kwargs)
        if channel is not None:
            channel._made = True


class QoS(SweepingQoS):
    def append(self, message: Any, delivery_tag: Any) -> None:
        """kombu's record of a delivered message (``unacked``), its lease stamped with Redis's
        time (kombu's uses this host's); for a message taken into this channel's in-flight
        list, with its removal from that list in the same transaction: the message is in
        exactly one of the two at every moment, for one round trip."""
        taking = self.channel._taking
        self.channel._made = False  # (not delivered unless recorded below)
        delivery = message.delivery_info
        record = dumps([message._raw, delivery["exchange"], delivery["routing_key"]])
        self.channel._taking = None  # (an envelope that failed above is dead-lettered instead)
        with self.pipe_or_acquire() as pipe:
            stamp_leases(pipe, self._index_key(), [delivery_tag], renew=False)
            pipe.hset(self.unacked_key, delivery_tag, record)
            if taking is not None:
                pipe.lrem(taking[0], 1, taking[1])
            pipe.execute()
        virtual.QoS.append(self, message, delivery_tag)


class Channel(SweepingChannel):
    QoS = QoS
    Message = Message
    #: Whether the item being delivered was made into a message and not yet recorded: only a
    #: no-ack consumer's (``QoS.append`` clears it).
    _made = False
    #: The in-flight list and the message being delivered from it (see ``QoS.append``).
    _taking: tuple[str, bytes] | None = None
    #: The lists of the pending take, and what it waits for: "blmove", "any" (the script),
    #: "bell" (``XREAD`` on the doorbells, nothing moved).
    _take_lists: list[str] | None = None
    _take_stage = ""
    _take_wait = TAKE_WAIT_S
    _sync_client: tuple[Any, Any] | None = None
    #: Transport options: the replicas a published job must be on before the publish returns
    #: (``VOXQUEUE_REDIS_WAIT_REPLICAS``), and how long that waits at most.
    replicas_to_wait = 0
    replica_wait_ms = 200
    from_transport_options = (  # type: ignore[assignment]  # (kombu's: a tuple of names)
        *SweepingChannel.from_transport_options, "replicas_to_wait", "replica_wait_ms")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.global_keyprefix:
            raise ValueError(NO_KEYPREFIX)
        self._replica_wait = (ReplicaWait(int(self.replicas_to_wait), int(self.replica_wait_ms))
                              if self.replicas_to_wait else None)
        self.take_wait_s = min(TAKE_WAIT_S, self.lease_s / 2)

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

    # -- publishing: the push and its doorbell in one round trip ---------------------------------
    def _put(self, queue: str, message: Any, **kwargs: Any) -> None:
        """kombu's push, and the ring of its list's doorbell (see ``voxqueue.broker.take``)."""
        key = self._q_for_pri(queue, self._get_message_priority(message, reverse=False))
        batch = kwargs.get("_publish_batch")
        wait = self._replica_wait
        if batch is not None:
            super()._put(queue, message, **kwargs)
            for name, *args in ring_commands(key):
                batch.add(name, *args)
            if wait is not None:  # (its answer is not read: the batch's replies are kombu's)
                batch.add("execute_command", "WAIT", wait.replicas, wait.timeout_ms(self.client))
            return
        with self.conn_or_acquire() as client, client.pipeline(transaction=False) as pipe:
            pipe.lpush(key, dumps(message))
            if self._expires and queue in self._expires:
                for p in self.priority_steps:
                    pipe.pexpire(self._q_for_pri(queue, p), self._expires[queue])
            for name, *args in ring_commands(key):
                getattr(pipe, name)(*args)
            if wait is not None:  # on a replica before the publish returns: a failover keeps it
                pipe.execute_command("WAIT", wait.replicas, wait.timeout_ms(client))
            replies = pipe.execute()
            if wait is not None:
                wait.acked(replies[-1], f"a job published to {queue}", client)

    # -- taking a message without a gap ---------------------------------------------------------
    def _brpop_start(self, timeout: Any = None) -> None:
        queues = list(dict.fromkeys(self._queue_cycle.consume(len(self.active_queues))))
        if not queues:
            return
        lists = [self._q_for_pri(q, p) for p in self.priority_steps for q in queues]
        inflight = [inflight_key(name, self._channel_id) for name in lists]
        if self._take_lists is not None:  # the last take's reply was lost with its connection
            self._drop_take(strict=True)
        self._keep_alive(inflight)
        self._take_lists = lists
        self._in_poll = self.client.connection
        self._brpop_sent_at = monotonic()  # type: ignore[assignment]
        wait = self.take_wait_s if timeout is None else timeout
        if len(lists) == 1:
            self._take_stage = "blmove"
            self.client.connection.send_command(
                "BLMOVE", lists[0], inflight[0], "RIGHT", "LEFT", wait or 0)
        else:
            self._take_stage = "any"
            self._take_wait = wait or self.take_wait_s
            self.client.connection.send_command(*take_any_command(lists, inflight))

    def _brpop_read(self, **options: Any) -> Any:
        lists, stage = self._take_lists, self._take_stage
        if lists is None:
            return super()._brpop_read(**options)
        connection = self.client.connection
        try:
            reply = self.client.parse_response(
                connection, {"blmove": "BLMOVE", "any": "EVAL"}.get(stage, "XREAD"), **options)
        except self.connection_errors:
            connection.disconnect()
            self._in_poll = None  # type: ignore[assignment]  # (its lists: see _drop_take)
            raise
        except BaseException:
            self._end_take()
            raise
        got = (0, reply) if stage == "blmove" and reply else None
        if stage == "any" and (got := taken(reply)) is None:
            self._take_stage = "bell"  # all empty: wait for a ring (still in poll)
            connection.send_command(*wait_command(lists, reply, self._take_wait))
            raise Empty()
        self._end_take()
        if got is None:  # (a take's wait, or a ring, ended without a message)
            raise Empty()
        self._deliver_taken(lists[got[0]], got[1])
        return True

    def _end_take(self) -> None:
        self._take_lists, self._take_stage = None, ""
        self._in_poll = None  # type: ignore[assignment]
        self._flush_brpop_reauth()

    def _deliver_taken(self, source: str, item: bytes) -> None:
        """Deliver ``item``, taken from the list ``source`` into this channel's in-flight list:
        recorded in ``unacked`` by ``QoS.append`` (one transaction), or dead-lettered when it is
        no message kombu can deliver."""
        queue = source.rsplit(self.sep, 1)[0]
        self._queue_cycle.rotate(queue)
        key = inflight_key(source, self._channel_id)
        if broker_take.ARMED:
            with self.conn_or_acquire() as client:
                broker_take.crash_after_take(client, source)
        try:
            payload = loads(bytes_to_str(item))
        except (ValueError, TypeError):
            payload = None
        if not isinstance(payload, dict):
            what = "not JSON" if payload is None else (
                f"JSON {type(payload).__name__}, not a message envelope")
            with self.conn_or_acquire() as client:
                bury(client, key, source, item, what)
            return
        self._taking, self._made = (key, item), False
        try:
            self.connection._deliver(payload, queue)  # now in unacked
        except Exception as exc:
            if self._taking is None or self._made:  # recorded, or given to a no-ack consumer
                raise
            with self.conn_or_acquire() as client:  # neither a message nor recorded
                bury(client, key, source, item, f"not a message kombu can deliver "
                     f"({type(exc).__name__}: {str(exc)[:80]})")
            self._taking = None
            return
        finally:
            taking, self._taking = self._taking, None
            if taking is not None:  # not recorded by QoS.append: a no-ack consumer's
                with self.conn_or_acquire() as client:
                    client.lrem(key, 1, item)

    def close(self) -> None:
        """kombu reads a pending take's reply before closing: up to a take's wait. A pending
        take is dropped instead (see ``_drop_take``)."""
        self._drop_take()
        super().close()

    def _basic_cancel(self, consumer_tag: str) -> Any:
        """A take pending on a queue no longer consumed is dropped: else the channel's next
        take, of another queue, waits behind it (a client's ``inspect``, which consumes a new
        reply queue each time, missed every other answer)."""
        answer = super()._basic_cancel(consumer_tag)
        active = set(self.active_queues)
        if any(name.rsplit(self.sep, 1)[0] not in active for name in self._take_lists or ()):
            self._drop_take()
        return answer

    def _drop_take(self, *, strict: bool = False) -> None:
        """Drop a pending take with its connection (the channel's next take connects again),
        or a take whose reply was lost with its connection, and put back in their queues now
        whatever it moved. When Redis fails meanwhile, the lease sweep does it once the lists
        are no longer marked alive; ``strict`` (the channel goes on with the same lists, which
        it marks) raises instead, and the take is dropped again at the next try."""
        lists, connection = self._take_lists, cast(Any, self._in_poll)
        if lists is None:
            return
        self._in_poll = None  # type: ignore[assignment]
        self._take_lists, self._take_stage = None, ""
        try:
            if connection:
                connection.disconnect()
            with self.conn_or_acquire() as client:
                for name in lists:
                    give_back(client, name, self._channel_id)
        except (InconsistencyError, redis.RedisError, OSError) as exc:
            if strict:
                self._take_lists = lists
                raise
            log.info("in-flight list left to the lease sweep: %s", exc)


class Transport(SweepingTransport):
    """kombu's transport, its channels taking messages as above."""

    Channel = Channel


class SentinelChannel(Channel, kombu_redis.SentinelChannel):
    """The same channel, on the primary a majority of the sentinels name (``sentinel://``
    URLs): every new connection and every reconnection asks them, so a reconnection after a
    failover finds the new primary.

    The sentinels come from the ``sentinels`` transport option, and the broker URL names one
    of them: kombu takes the other URLs of a ``;`` list as alternates, and switching to one
    would build kombu's own transport from its scheme (BRPOP: a message lost to a kill, a
    worker stopped by a malformed one) in place of this one.
    """

    from_transport_options = tuple(dict.fromkeys((  # type: ignore[assignment]
        *Channel.from_transport_options, *kombu_redis.SentinelChannel.from_transport_options,
        "sentinels")))
    sentinels: list[tuple[str, int]] | None = None
    #: Each reconnection asks the sentinels again (redis-py's own redials the old primary).
    connection_class = PrimaryConnection

    def _sentinel_managed_pool(self, asynchronous: bool = False) -> Any:
        params = self._connparams(asynchronous)
        for name in ("host", "port"):
            params.pop(name, None)
        sentinels = [(str(host), int(port)) for host, port in self.sentinels or []] or [
            (self.connection.client.hostname, self.connection.client.port or 26379)]
        manager = QuorumSentinel(
            sentinels, min_other_sentinels=getattr(self, "min_other_sentinels", 0),
            sentinel_kwargs=getattr(self, "sentinel_kwargs", None), **params)
        if asynchronous:
            self._async_sentinel_manager = manager
        else:
            self._sentinel_manager = manager
        master: str | None = getattr(self, "master_name", None)
        if master is None:
            raise ValueError("'master_name' transport option must be specified.")
        login = {k: params[k] for k in ("username", "password") if k in params}
        return manager.master_for(master, redis.Redis, **login).connection_pool


class SentinelTransport(Transport):
    """:class:`Transport` through Redis Sentinel (kombu's ``SentinelTransport`` with our take)."""

    default_port = 26379  # type: ignore[assignment]  # (kombu's is None)
    Channel = SentinelChannel
