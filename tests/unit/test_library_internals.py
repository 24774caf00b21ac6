"""The kombu and Celery internals that ``voxqueue/broker/transport.py`` and
``workers/runtime/consumer.py`` extend are still there, under the names they use: a release that
renames or drops one fails here, by name, before any whole-system test hangs on it. (pyproject.toml
allows one minor release of each at a time.)"""

from __future__ import annotations

import inspect

import pytest
from celery.worker.consumer import Consumer
from kombu.transport import redis as kombu_redis

from voxqueue.broker import transport as broker
from workers.runtime import consumer

#: (base class, attribute) pairs: methods overridden or called, and attributes read.
USED = [
    (kombu_redis.Channel, name) for name in (
        "_brpop_start", "_brpop_read", "_create_client", "_connparams", "_basic_cancel",
        "close", "conn_or_acquire", "_flush_brpop_reauth", "active_queues",
        "global_keyprefix", "priority_steps", "_in_poll", "_do_restore_message", "_q_for_pri",
        "_get_message_priority", "sep", "_put", "Message", "_update_queue_cycle")
] + [
    (kombu_redis.QoS, name) for name in (
        "restore_visible", "append", "pipe_or_acquire", "unacked_index_key", "unacked_key",
        "unacked_mutex_key", "unacked_mutex_expire", "_remove_from_indices")
] + [
    (kombu_redis.MultiChannelPoller, name) for name in (
        "maybe_restore_messages", "maybe_refresh_binding_expiry")
] + [
    (kombu_redis.Transport, "register_with_event_loop"),
    (kombu_redis, "Mutex"),
    (kombu_redis, "MutexHeld"),
    (Consumer, "on_send_event_buffered"),
    (Consumer, "_flush_events"),
]


@pytest.mark.parametrize(("base", "name"), USED, ids=[f"{b.__name__}.{n}" for b, n in USED])
def test_an_internal_we_use_exists(base: type, name: str) -> None:
    where = f"{getattr(base, '__module__', None) or ''}.{base.__name__}".lstrip(".")
    assert hasattr(base, name), f"{where} has no {name!r} any more"


def test_overrides_keep_their_base_signatures() -> None:
    """An override takes what its base method takes (Celery and kombu call them so)."""
    pairs = [(broker.Channel, kombu_redis.Channel, n)
             for n in ("_brpop_start", "_brpop_read", "_basic_cancel", "_put")]
    pairs += [(broker.Message, kombu_redis.Channel.Message, "__init__")]
    pairs += [(broker.QoS, kombu_redis.QoS, n) for n in ("restore_visible", "append")]
    pairs += [(broker.Transport, kombu_redis.Transport, "register_with_event_loop"),
              (consumer.Consumer, Consumer, "on_send_event_buffered")]
    for ours, base, name in pairs:
        theirs = list(inspect.signature(getattr(base, name)).parameters)
        mine = list(inspect.signature(getattr(ours, name)).parameters)
        assert [p for p in theirs if p not in ("args", "kwargs", "options")] == \
            [p for p in mine if p not in ("args", "kwargs", "options")], (ours, name)


def test_the_channel_attributes_the_take_reads_are_set_by_kombu() -> None:
    """Set in kombu's ``__init__`` (not on the class): the queue cycle the take rotates, and
    the expiring queues ``_put`` extends."""
    source = inspect.getsource(kombu_redis.Channel.__init__)
    assert "self._expires =" in source
    assert "self._queue_cycle" in inspect.getsource(kombu_redis.Channel) + inspect.getsource(
        kombu_redis.virtual.Channel)


def test_the_poller_sets_the_timers_the_transport_replaces() -> None:
    """``Transport.register_with_event_loop`` cancels and replaces two of kombu's timers,
    which kombu's own registration must still set under those names."""
    source = inspect.getsource(kombu_redis.Transport.register_with_event_loop)
    for timer in ("_restore_messages_tref", "_binding_expiry_tref"):
        assert f"cycle.{timer}" in source, timer
