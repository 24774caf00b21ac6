"""The ``monitor`` queue's check task, and the monitors of the settings, synced at beat start."""

from __future__ import annotations

from typing import Any

import structlog
from celery import Celery, Task
from celery.signals import beat_init

from voxqueue.celery_config import TIME_LIMITS
from voxqueue.settings import Settings
from workers.app import app
from workers.monitor import checks
from workers.monitor.alerts import Alerter
from workers.monitor.monitors import Monitor, MonitorStore, settings_monitors
from workers.monitor.schedule import (
    RUN_CHECK,
    is_scheduled,
    schedule_monitor,
    unschedule_monitor,
)
from workers.runtime.resources import Runtime
from workers.runtime.stage import runtime_of

log = structlog.get_logger("voxqueue.monitor")


@app.task(name=RUN_CHECK, bind=True, time_limit=TIME_LIMITS["monitor"], ignore_result=True)
def run_check(self: Task, name: str) -> str:
    """Check one monitor and alert on a change of state; returns the state."""
    rt = runtime_of(self)
    monitor = MonitorStore(rt.redis, rt.keys).get(name)
    if monitor is None:  # deleted: drop its beat entry too
        unschedule_monitor(rt.celery, name)
        return "deleted"
    result = checks.run_check(monitor, rt)
    change = Alerter(rt.redis, rt.keys, rt.settings.turns.session_ttl_s).record(monitor, result)
    if change.alerted:
        log.warning("monitor alert", monitor=name, old=change.old, new=change.new, text=change.text)
    return result.state


def monitors_from_settings(settings: Settings) -> list[Monitor]:
    """The valid monitors of ``VOXQUEUE_MONITORS`` (invalid ones are logged and skipped)."""

    def invalid(raw: dict[str, Any], error: str) -> None:
        log.error("invalid monitor in the settings", monitor=raw, error=error)

    return settings_monitors(settings, on_invalid=invalid)


def sync_monitors(celery_app: Celery, rt: Runtime) -> list[str]:
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
        names = sync_monitors(beat_app, beat_app.runtime)
    except Exception as exc:  # beat must keep running its other entries
        log.exception("could not sync the monitors", error=str(exc))
        return
    log.info("monitors synced", from_settings=names)
