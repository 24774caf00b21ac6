"""kombu's Redis transport, with two fixes (a crash on reconnection, a message lost by a worker
killed while taking it) and one saving (a client per connection pool, not per operation).

**Taking a message.** kombu takes a message with ``BRPOP`` and only then, in the worker, adds
it to its ``unacked`` set. A worker killed between the two (the reply read off the socket, or
still in it, waiting for a busy interpreter) loses the message: it is in no queue and in no
set. A channel that consumes one queue (every worker ``voxqueue up``, compose and Kubernetes
run) takes it with ``BLMOVE queue inflight`` instead: Redis moves it, atomically, into a list
of that channel's own, and moves it from there into ``unacked`` in one transaction. The channel
marks itself alive at each take; a list whose channel stopped doing so for a lease is put back
in its queue by any worker (:func:`return_orphans`, run with kombu's restore sweep). A channel on
several queues keeps kombu's ``BRPOP`` (one ``BLMOVE`` waits on one list only).

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
from time import monotonic, time
from typing import Any

import redis
from kombu.exceptions import InconsistencyError
from kombu.transport import redis as kombu_redis
from kombu.transport import virtual
from kombu.utils.encoding import bytes_to_str
from kombu.utils.json import dumps, loads

log = logging.getLogger("voxqueue.broker")

#: The set of every channel's in-flight list, and the lists' prefix.
INFLIGHT_INDEX = "_voxqueue.inflight"
_INFLIGHT = "_voxqueue.inflight."

# KEYS: the in-flight list, its alive key, its queue, the index. Puts the list's messages back
# at the head of their queue (next to be taken) unless its channel is alive.
_RETURN_ORPHANS = """
if redis.call('exists', KEYS[2]) == 1 then return -1 end
local n = 0
while redis.call('lmove', KEYS[1], KEYS[3], 'RIGHT', 'RIGHT') do n = n + 1 end
redis.call('srem', KEYS[4], KEYS[1])
return n
"""


#: Prefix of the keys that give one process the turn to sweep (see :func:`take_sweep_turn`).
_SWEEP_TURN = "_voxqueue.sweep."


def take_sweep_turn(client: redis.Redis, name: str, every_s: float) -> bool:
    """True for one caller in every ``every_s`` seconds, across all processes: a sweep that
    any worker may do needs doing once per period, not once per worker process."""
    return bool(client.set(f"{_SWEEP_TURN}{name}", b"1", nx=True, px=max(1, int(every_s * 1000))))


def inflight_key(queue: str, channel_id: str) -> str:
    return f"{_INFLIGHT}{queue}.{channel_id}"


def return_orphans(client: redis.Redis) -> int:
    """Put back in their queues the messages of every in-flight list whose channel is dead
    (it did not take a message, nor wait for one, for a lease). Returns how many."""
    returned = 0
    script = client.register_script(_RETURN_ORPHANS)
    for raw in client.smembers(INFLIGHT_INDEX):
        key = bytes_to_str(raw)
        queue = key[len(_INFLIGHT):].rsplit(".", 1)[0]
        n = int(script(keys=[key, f"{key}.alive", queue, INFLIGHT_INDEX]))
        returned += max(0, n)
    return returned


class QoS(kombu_redis.QoS):
    def restore_visible(self, start: int = 0, num: int = 10, interval: int = 10) -> None:
        """The sweeps that give a dead worker's messages back: kombu's (expired leases) and
        ours (in-flight lists of dead channels). Every worker process calls this each restore
        interval; one of them sweeps, the others only find that it is not their turn."""
        channel = self.channel
        every = float(getattr(channel, "unacked_restore_interval", 1) or 1)
        try:
            with channel.conn_or_acquire() as client:
                if not take_sweep_turn(client, "unacked", every * 0.9):
                    return
                if returned := return_orphans(client):
                    log.warning("%d message(s) of a dead worker's channel put back in their "
                                "queue", returned)
        except InconsistencyError:
            return
        super().restore_visible(start, num, interval)

    def append(self, message: Any, delivery_tag: Any) -> None:
        """kombu's record of a delivered message (``unacked``); for a message taken into this
        channel's in-flight list, with its removal from that list in the same transaction:
        the message is in exactly one of the two at every moment, for one round trip."""
        taking = self.channel._taking
        if taking is None:
            return super().append(message, delivery_tag)
        self.channel._taking = None
        delivery = message.delivery_info
        with self.pipe_or_acquire() as pipe:
            pipe.zadd(self.unacked_index_key, {delivery_tag: time()})
            pipe.hset(self.unacked_key, delivery_tag,
                      dumps([message._raw, delivery["exchange"], delivery["routing_key"]]))
            pipe.lrem(taking[0], 1, taking[1])
            pipe.execute()
        virtual.QoS.append(self, message, delivery_tag)
        return None


class Channel(kombu_redis.Channel):
    QoS = QoS
    #: The in-flight list and the message being delivered from it (see ``QoS.append``).
    _taking: tuple[str, bytes] | None = None
    _inflight_queue: str | None = None
    _sync_client: tuple[Any, Any] | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._channel_id = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self._alive_at = -1e9
        self.lease_s = float(self.visibility_timeout)

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
            return super()._brpop_start(timeout)
        queue = queues[0]
        key = inflight_key(queue, self._channel_id)
        self._keep_alive(key)
        self._inflight_queue = queue
        self._in_poll = self.client.connection
        self._brpop_sent_at = monotonic()  # type: ignore[assignment]
        wait = self.brpop_timeout if timeout is None else timeout
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

    def _keep_alive(self, key: str) -> None:
        """Mark this channel's in-flight list alive for a lease (at most every quarter lease)."""
        now = monotonic()
        if now - self._alive_at < self.lease_s / 4:
            return
        try:
            with self.conn_or_acquire() as client:
                pipe = client.pipeline(transaction=False)
                pipe.set(f"{key}.alive", b"1", px=int(self.lease_s * 1000))
                pipe.sadd(INFLIGHT_INDEX, key)
                pipe.execute()
        except InconsistencyError:
            return
        self._alive_at = now


class Transport(kombu_redis.Transport):
    Channel = Channel
