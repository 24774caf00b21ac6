"""The monitors of the settings (``VOXQUEUE_MONITORS``), synced when beat starts: stored and
given their beat entries. Connected to ``beat_init`` by importing this module, as both the
workers' app and the light app ``voxqueue up`` runs beat on (``workers.control_app``) do; it
needs Redis and the settings only, not the workers' runtime."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import redis
import structlog
from celery import Celery
from celery.signals import beat_init

from voxqueue.keys import Keys
from voxqueue.redis_conn import connect
from voxqueue.settings import Settings, get_settings
from workers.monitor.monitors import Monitor, MonitorStore, settings_monitors
from workers.monitor.schedule import is_scheduled, schedule_monitor, unschedule_monitor

log = structlog.get_logger("voxqueue.monitor")


class SyncNeeds(Protocol):
    """What a sync needs (a worker's ``Runtime`` has it)."""

    @property
    def redis(self) -> redis.Redis: ...

    @property
    def keys(self) -> Keys: ...

    @property
    def settings(self) -> Settings: ...


@dataclass(frozen=True)
class _Stores:
    redis: redis.Redis
    keys: Keys
    settings: Settings

    @classmethod
    def of(cls, settings: Settings) -> _Stores:
        return cls(connect(settings), Keys(settings.redis.key_prefix), settings)


def monitors_from_settings(settings: Settings) -> list[Monitor]:
    """The valid monitors of ``VOXQUEUE_MONITORS`` (invalid ones are logged and skipped)."""

    def invalid(raw: dict[str, Any], error: str) -> None:
        log.error("invalid monitor in the settings", monitor=raw, error=error)

    return settings_monitors(settings, on_invalid=invalid)


def sync_monitors(celery_app: Celery, rt: SyncNeeds) -> list[str]:
    """Make the stored monitors match the settings' ones (agent-made monitors stay), and give
    every stored monitor its beat entry. Idempotent; returns the settings' monitor names."""
    store = MonitorStore(rt.redis, rt.keys)
    wanted = {m.name: m for m in monitors_from_settings(rt.settings)}
    for old in store.all():
        if old.origin == "settings" and old.name not in wanted:
            store.delete(old.name)
            unschedule_monitor(celery_app, old.name)
    for monitor in wanted.values():
        current = store.get(monitor.name)
        if current is not None and current.origin != "settings":
            log.error(
                "a monitor of the settings has the name of one the agent made; skipped",
                monitor=monitor.name,
            )
            continue
        if current is None or current.model_dump(exclude={"created_at"}) != monitor.model_dump(
            exclude={"created_at"}
        ):
            store.save(monitor, replace=True)
    for monitor in store.all():
        if monitor.name in wanted or not is_scheduled(celery_app, monitor.name):
            schedule_monitor(celery_app, monitor)
    return sorted(wanted)


@beat_init.connect
def _sync_at_beat_start(sender: Any = None, **kwargs: Any) -> None:
    """Runs in the beat process once it holds redbeat's lock (redbeat's handler runs first)."""
    try:
        beat_app = sender.app
        names = sync_monitors(beat_app, _Stores.of(get_settings()))
    except Exception as exc:  # beat must keep running its other entries
        log.exception("could not sync the monitors", error=str(exc))
        return
    log.info("monitors synced", from_settings=names)
