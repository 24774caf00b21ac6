"""``voxqueue doctor``: check everything a deployment needs and say how to fix what is wrong."""

from __future__ import annotations

import importlib.util
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

import redis

from voxqueue.keys import Keys
from voxqueue.redis_conn import redact
from voxqueue.settings import QUEUES, Settings


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    warning: bool = False


def check_redis(settings: Settings) -> tuple[Check, redis.Redis | None]:
    client = redis.Redis.from_url(settings.redis_url, socket_connect_timeout=2,
                                  socket_timeout=3)
    try:
        info: Any = client.info("server")
    except redis.RedisError as exc:
        return Check("redis", False, f"{redact(settings.redis_url)}: {exc}",
                     "start Redis, or set VOXQUEUE_REDIS_URL (password and TLS in the URL)"), None
    return Check("redis", True, f"{redact(settings.redis_url)} (Redis "
                 f"{info.get('redis_version')})"), client


def check_persistence(client: redis.Redis) -> list[Check]:
    out = []
    try:
        conf: Any = client.config_get("appendonly")
        policy: Any = client.config_get("maxmemory-policy")
    except redis.RedisError:
        return [Check("redis persistence", True, "CONFIG not allowed: not checked",
                      warning=True)]
    aof = (conf.get(b"appendonly") or conf.get("appendonly")) in (b"yes", "yes")
    out.append(Check("redis persistence", aof, "append-only file " + ("on" if aof else "off"),
                     "" if aof else "run redis-server with --appendonly yes, or queued turns "
                     "are lost on a restart", warning=not aof))
    value = policy.get(b"maxmemory-policy") or policy.get("maxmemory-policy")
    value = value.decode() if isinstance(value, bytes) else str(value)
    good = value == "noeviction"
    out.append(Check("redis eviction", good, f"maxmemory-policy {value}",
                     "" if good else "set maxmemory-policy noeviction: eviction drops queues",
                     warning=not good))
    return out


def check_workers(settings: Settings) -> list[Check]:
    from celery import Celery

    from voxqueue.celery_config import celery_config

    app = Celery("voxqueue-doctor", set_as_current=False)
    app.conf.update(celery_config(settings))
    try:
        active = app.control.inspect(timeout=1.5).active_queues() or {}
    except Exception as exc:
        return [Check("workers", False, f"cannot ask the workers: {exc}", "check Redis")]
    finally:
        app.close()
    out = []
    for queue in QUEUES:
        names = sorted(w for w, qs in active.items() if any(q["name"] == queue for q in qs))
        out.append(Check(f"workers: {queue}", bool(names),
                         ", ".join(names) if names else "no worker consumes this queue",
                         "" if names else f"run: voxqueue worker --queues {queue}"))
    return out


def check_beat(client: redis.Redis, settings: Settings) -> Check:
    lock = Keys(settings.key_prefix).redbeat_prefix() + ":lock"  # celery-redbeat's lock key
    try:
        held = client.exists(lock)
    except redis.RedisError as exc:
        return Check("beat", False, str(exc), "check Redis")
    if held:
        return Check("beat", True, "one beat holds the scheduler lock")
    return Check("beat", False, "no beat is running (timers, monitors and the deadline sweeper "
                 "need it)", "run exactly one: celery -A workers beat -S "
                 "workers.monitor.beat_scheduler:ResilientScheduler (voxqueue up does)")


def check_flower(settings: Settings) -> list[Check]:
    url = f"http://127.0.0.1:{settings.flower_port}/healthcheck"
    out = []
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            out.append(Check("flower", answer.status == 200, f"answers at {url}"))
    except (urllib.error.URLError, OSError) as exc:
        out.append(Check("flower", False, f"{url}: {exc}",
                         "run: celery -A workers flower (voxqueue up does)", warning=True))
    weak = settings.flower_password.get_secret_value() in ("voxqueue", "admin", "")
    out.append(Check("flower auth", not weak, "default password" if weak else "password set",
                     "set VOXQUEUE_FLOWER_PASSWORD" if weak else "", warning=weak))
    return out


def check_providers(settings: Settings) -> list[Check]:
    out = []
    wants_openai = {"stt": settings.stt == "openai", "llm": settings.llm == "openai"}
    for stage, wanted in wants_openai.items():
        if wanted and not settings.openai_api_key:
            out.append(Check(f"{stage} provider", False, "openai chosen without a key",
                             "set OPENAI_API_KEY, or VOXQUEUE_" + stage.upper() + "=auto"))
    if settings.tts == "elevenlabs" and not settings.elevenlabs_api_key:
        out.append(Check("tts provider", False, "elevenlabs chosen without a key",
                         "set ELEVENLABS_API_KEY, or VOXQUEUE_TTS=auto"))
    chosen = settings.providers_in_use()
    offline = {
        "stt": (chosen["stt"] == "pocketsphinx", "pocketsphinx"),
        "llm": (chosen["llm"] == "local", "hassil"),
        "tts": (chosen["tts"] == "piper", "piper"),
    }
    for stage, (used, module) in offline.items():
        if used:
            present = importlib.util.find_spec(module) is not None
            out.append(Check(f"{stage} provider", present, f"offline ({module})" + (
                "" if present else " not installed"),
                "" if present else 'pip install "voxqueue[offline]"'))
        elif not any(c.name == f"{stage} provider" for c in out):
            out.append(Check(f"{stage} provider", True, "cloud (key set)"))
    return out


def run_checks(settings: Settings) -> list[Check]:
    redis_check, client = check_redis(settings)
    checks = [redis_check]
    if client is not None:
        checks += check_persistence(client)
        checks += check_workers(settings)
        checks.append(check_beat(client, settings))
    checks += check_flower(settings)
    checks += check_providers(settings)
    return checks
