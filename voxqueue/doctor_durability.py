"""``voxqueue doctor``'s checks of what keeps data and work from being lost: where ``voxqueue
up`` keeps its data, Redis's fsync policy, whether a worker runs the housekeeping loop, and
crash points armed by accident."""

from __future__ import annotations

from typing import Any

import redis

from voxqueue.broker_sweeps import sweep_turn_holder
from voxqueue.doctor import Check
from voxqueue.embedded_redis import data_dir, data_dir_holder
from voxqueue.keys import Keys
from voxqueue.settings import Settings


def check_data_dir(settings: Settings) -> Check:
    folder = data_dir(settings)
    holder = data_dir_holder(folder)
    state = f"in use by voxqueue up (pid {holder})" if holder else "no voxqueue up uses it now"
    return Check("data folder", True, f"{folder}: the embedded Redis's data, kept from one "
                 f"voxqueue up to the next ({state}; VOXQUEUE_DATA_DIR)")


def check_crash_points(settings: Settings) -> Check:
    if not settings.redis.crash_at:
        return Check("crash points", True, "disarmed")
    return Check("crash points", False, f"VOXQUEUE_CRASH_AT={settings.redis.crash_at}: workers "
                 "SIGKILL themselves at these points (for tests only)",
                 "unset VOXQUEUE_CRASH_AT (in the environment or a .env file)", warning=True)


def check_appendfsync(client: redis.Redis, settings: Settings) -> Check:
    try:
        conf: Any = client.config_get("appendfsync")
    except redis.RedisError:
        return Check("redis fsync", True, "CONFIG not allowed: not checked", warning=True)
    value = conf.get(b"appendfsync") or conf.get("appendfsync")
    value = value.decode() if isinstance(value, bytes) else str(value)
    if value in ("always", settings.redis.appendfsync):
        return Check("redis fsync", True, f"appendfsync {value}" + (
            ": an acknowledged write survives a crash of Redis or of the machine"
            if value == "always" else " (VOXQUEUE_REDIS_APPENDFSYNC: a machine's crash can "
            "lose a second of writes)"))
    return Check("redis fsync", False, f"appendfsync {value}: a crash of the machine can lose "
                 "acknowledged writes, undoing a once-claim after its effect",
                 "run redis-server with --appendfsync always (or accept it: "
                 f"VOXQUEUE_REDIS_APPENDFSYNC={value})", warning=True)


def check_housekeeping(client: redis.Redis, settings: Settings) -> Check:
    try:
        holder = sweep_turn_holder(client, Keys(settings.redis.key_prefix).housekeeping_turn())
    except redis.RedisError as exc:
        return Check("housekeeping", False, str(exc), "check Redis")
    if holder:
        return Check("housekeeping", True, f"timers fire and overdue turns end in {holder}")
    return Check("housekeeping", False, "no worker runs the housekeeping loop: timers do not "
                 "fire and overdue turns are not ended", "start a worker (any queue): "
                 "voxqueue worker, or voxqueue up", warning=True)


def durability_checks(settings: Settings) -> list[Check]:
    """Every check of this module (those of Redis only when it answers)."""
    out = [check_data_dir(settings), check_crash_points(settings)]
    client = redis.Redis.from_url(settings.redis.url, socket_connect_timeout=2,
                                  socket_timeout=3)
    try:
        client.ping()
    except redis.RedisError:
        return out
    try:
        return [*out, check_appendfsync(client, settings), check_housekeeping(client, settings)]
    finally:
        client.close()
