"""``voxqueue doctor``: check everything a deployment needs and say how to fix what is wrong.

Among them (:func:`durability_checks`), what keeps data and work from being lost: where ``voxqueue
up`` keeps its data, Redis's fsync policy, whether a worker runs the housekeeping loop, and
crash points armed by accident.
"""

from __future__ import annotations

import importlib.util
import re
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

import redis

from voxqueue.broker.dead_letters import doctor_rows
from voxqueue.broker.sweeps import sweep_turn_holder
from voxqueue.keys import Keys
from voxqueue.redis_conn import (
    RedisAddressError,
    connect,
    look_through,
    redact,
    sentinel_address,
)
from voxqueue.settings import QUEUES, Settings, whisper_installed
from voxqueue.up.embedded_redis import data_dir, data_dir_holder
from voxqueue.up.flower_auth import OLD_FLOWER_PASSWORD, flower_password_file
from voxqueue.up.running import RUNNING_FILE, UpProcesses, up_processes


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    warning: bool = False


def check_sentinels(settings: Settings) -> Check | None:
    """With a ``sentinel://`` URL: the primary, replicas and sentinels they see, or which of
    them is wrong."""
    try:
        address = sentinel_address(settings)
    except RedisAddressError as exc:
        return Check("redis sentinels", False, str(exc), "see docs/failover.md")
    if address is None:
        return None
    view = look_through(address)
    if view.problem:
        return Check("redis sentinels", False, view.problem,
                     "start the sentinels, or check VOXQUEUE_REDIS_URL and VOXQUEUE_REDIS_MASTER")
    return Check("redis sentinels", True,
                 f"primary {view.primary}, replicas {', '.join(view.replicas or []) or 'none'}; "
                 f"sentinels answering {', '.join(view.answered)} ({view.quorum})",
                 warning=not view.replicas)


def check_redis(settings: Settings) -> tuple[Check, redis.Redis | None]:
    client: redis.Redis = connect(settings, patient=False)
    try:
        info: Any = client.info("server")
    except redis.RedisError as exc:
        return Check("redis", False, f"{redact(settings.redis.url)}: {exc}",
                     "start Redis, or set VOXQUEUE_REDIS_URL (password and TLS in the URL)"), None
    return Check("redis", True, f"{redact(settings.redis.url)} (Redis "
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

    from voxqueue.celery_config import make_celery

    app = make_celery(settings, "voxqueue-doctor")
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
    lock = Keys(settings.redis.key_prefix).redbeat_prefix() + ":lock"  # celery-redbeat's lock key
    try:
        held = client.exists(lock)
    except redis.RedisError as exc:
        return Check("beat", False, str(exc), "check Redis")
    if held:
        return Check("beat", True, "one beat holds the scheduler lock")
    return Check("beat", False, "no beat is running (the scheduled monitors need it; timers and "
                 "the deadline sweeper run in the workers)",
                 "run exactly one: celery -A workers beat -S "
                 "workers.housekeeping.beat_scheduler:ResilientScheduler (voxqueue up does)")


def check_flower(settings: Settings) -> list[Check]:
    url = f"http://127.0.0.1:{settings.dashboard.flower_port}/healthcheck"
    out = []
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            out.append(Check("flower", answer.status == 200, f"answers at {url}"))
    except (urllib.error.URLError, OSError) as exc:
        out.append(Check("flower", False, f"{url}: {exc}",
                         "run: celery -A workers flower (voxqueue up does)", warning=True))
    password = settings.dashboard.flower_password
    chosen = password.get_secret_value() if password else ""
    if chosen in ("", OLD_FLOWER_PASSWORD):
        out.append(Check("flower auth", True, "a made-up password, kept in "
                         f"{flower_password_file(settings)} (voxqueue up makes it)"))
        return out
    weak = chosen in ("admin", settings.dashboard.flower_user) or len(chosen) < 8
    out.append(Check("flower auth", not weak, "weak password" if weak else "password set",
                     "set a longer VOXQUEUE_FLOWER_PASSWORD, or unset it" if weak else "",
                     warning=weak))
    return out


def check_providers(settings: Settings) -> list[Check]:
    out = []
    wants_openai = {"stt": settings.providers.stt == "openai",
                    "llm": settings.providers.llm == "openai"}
    for stage, wanted in wants_openai.items():
        if wanted and not settings.providers.openai_api_key:
            out.append(Check(f"{stage} provider", False, "openai chosen without a key",
                             "set OPENAI_API_KEY, or VOXQUEUE_" + stage.upper() + "=auto"))
    if settings.providers.tts == "elevenlabs" and not settings.providers.elevenlabs_api_key:
        out.append(Check("tts provider", False, "elevenlabs chosen without a key",
                         "set ELEVENLABS_API_KEY, or VOXQUEUE_TTS=auto"))
    if not any(c.name == "stt provider" for c in out):
        out.append(stt_check(settings))
    chosen = settings.providers.in_use()
    offline = {
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
            out.append(Check(f"{stage} provider", True, "cloud (key set)" + (
                f", {OPENAI_APIS[settings.providers.openai_api]} (VOXQUEUE_OPENAI_API)"
                if stage == "llm" and chosen["llm"] == "openai" else "")))
    return out


#: How the doctor names each ``VOXQUEUE_OPENAI_API``.
OPENAI_APIS = {"chat": "OpenAI Chat Completions API", "responses": "OpenAI Responses API"}


def stt_check(settings: Settings) -> Check:
    """Which speech recognizer runs, and why (``auto`` explained)."""
    chosen = settings.providers.in_use()["stt"]
    why = "VOXQUEUE_STT" if settings.providers.stt != "auto" else "auto"
    if chosen == "openai":
        return Check("stt provider", True,
                     f"openai, {settings.providers.stt_model} ({why}: key set)")
    if chosen == "whisper":
        if importlib.util.find_spec("faster_whisper") is None:
            return Check("stt provider", False, "whisper chosen, faster-whisper not installed",
                         'pip install "voxqueue[whisper]"')
        source = ("the packaged base model" if settings.providers.whisper_model == "base"
                  and whisper_installed(settings.providers) else settings.providers.whisper_model)
        return Check("stt provider", True, f"whisper, {source} ({why}: offline, "
                     f"{settings.providers.whisper_threads} threads, "
                     f"beam {settings.providers.whisper_beam_size})")
    present = importlib.util.find_spec("pocketsphinx") is not None
    missing = ("Whisper not installed" if importlib.util.find_spec("faster_whisper") is None
               else f"no Whisper model {settings.providers.whisper_model!r} here")
    detail = f"pocketsphinx ({why}" + (")" if settings.providers.stt != "auto" else
                                       f": no OpenAI key, {missing})")
    suggest = present and settings.providers.stt == "auto"
    return Check("stt provider", present, detail if present else "pocketsphinx not installed",
                 'pip install "voxqueue[whisper]" for better offline accuracy' if suggest
                 else "" if present else 'pip install "voxqueue[offline]"', warning=suggest)


# -- memory per key family -------------------------------------------------------------------
#: How many keys ``scan_key_families`` looks at, at most (it stays fast on a big Redis).
SCAN_LIMIT = 20_000

#: In our keys, the segment after one of these is an id (``vq:turn:<id>:events``).
_ID_FOLLOWS = frozenset({"turn", "session", "device", "monitor", "owner", "tool", "deliveries",
                         "done", "crash-plan", "crash-fired"})

#: Our key families that belong to one turn, session or job: every key must expire.
_MUST_EXPIRE = frozenset({"turn", "session", "deliveries", "done", "crash-plan", "crash-fired"})

#: Celery's own keys: the queues (a priority suffix, "\\x06\\x16" and a digit, joins its queue)
#: and the unacked messages of late acks.
_CELERY_KEYS = frozenset({*QUEUES, "unacked", "unacked_index", "unacked_mutex"})

_CELERY_META = re.compile(r"(celery-task-meta-|chord-unlock-)(.+)|(celery-taskset-meta-)(.+?)"
                          r"(\.[jtsdc])?")

_PRIORITY = re.compile(r"\x06\x16\d+$")


@dataclass
class KeyFamily:
    """Keys of one kind, their ids replaced by ``*``: how many, their memory, how many
    never expire."""

    name: str
    count: int = 0
    bytes: int = 0
    no_ttl: int = 0
    must_expire: bool = False


@dataclass
class KeyReport:
    families: list[KeyFamily] = field(default_factory=list)
    """Largest first."""
    scanned: int = 0
    capped: bool = False
    """The scan stopped at ``SCAN_LIMIT`` keys: the figures cover a part of Redis."""


def family_of(key: str, prefix: str) -> str | None:
    """``vq:turn:3f2a…:events`` → ``vq:turn:*:events``; Celery's keys likewise; None for a
    key that is neither ours nor Celery's."""
    if key.startswith(prefix + ":"):
        return _our_family(prefix, key[len(prefix) + 1:].split(":"))
    base = _PRIORITY.sub("", key)
    if base in _CELERY_KEYS or key.startswith("_kombu.binding."):
        return base
    if key.endswith(".reply.celery.pidbox"):
        return "*.reply.celery.pidbox"
    meta = _CELERY_META.fullmatch(key)
    if meta is None:
        return None
    return f"{meta[1]}*" if meta[1] else f"{meta[3]}*{meta[5] or ''}"


def _our_family(prefix: str, parts: list[str]) -> str:
    """The family of ``prefix:`` + ``":".join(parts)``."""
    if parts[0] == "redbeat":  # beat's own keys ("vq:redbeat::lock") and its entries
        return ":".join([prefix, *parts]) if parts[1:2] == [""] else f"{prefix}:redbeat:*"
    out = parts[:1]
    for part in parts[1:]:
        if out[-1] == "once":  # a guard's name may hold ids too
            out.append("*")
            break
        if out[-1] == "owner" and part in ("device", "session"):  # vq:owner:device:<id>:memory
            out.append(part)
            continue
        out.append("*" if out[-1] in _ID_FOLLOWS or part.isdigit() else part)
    return ":".join([prefix, *out])


def must_expire(family: str, prefix: str) -> bool:
    """Whether a family's keys belong to one turn, session or job and so must have a TTL."""
    if family.startswith(prefix + ":"):
        parts = family[len(prefix) + 1:].split(":")
        return len(parts) > 1 and parts[0] in _MUST_EXPIRE and parts[1] == "*"
    return family.startswith(("celery-task-meta-", "celery-taskset-meta-"))


def scan_key_families(client: redis.Redis, prefix: str, limit: int = SCAN_LIMIT,
                      batch: int = 500) -> KeyReport:
    """Count, memory (``MEMORY USAGE``, sampled: an estimate for big lists and streams) and
    keys without a TTL per family, over at most ``limit`` keys."""
    report = KeyReport()
    families: dict[str, KeyFamily] = {}
    keys: list[tuple[bytes, str]] = []
    for raw in client.scan_iter(count=1000):
        report.scanned += 1
        name = family_of(raw.decode(errors="replace"), prefix)
        if name is not None:
            keys.append((raw, name))
        if len(keys) >= batch:
            _measure(client, keys, families, prefix)
            keys = []
        if report.scanned >= limit:
            report.capped = True
            break
    _measure(client, keys, families, prefix)
    report.families = sorted(families.values(), key=lambda f: (-f.bytes, f.name))
    return report


def _measure(client: redis.Redis, keys: list[tuple[bytes, str]],
             families: dict[str, KeyFamily], prefix: str) -> None:
    pipe = client.pipeline(transaction=False)
    for raw, _name in keys:
        pipe.ttl(raw)
        pipe.memory_usage(raw)
    answers: list[Any] = pipe.execute(raise_on_error=False)
    for i, (_raw, name) in enumerate(keys):
        ttl, size = answers[2 * i], answers[2 * i + 1]
        if ttl == -2:  # gone since the scan
            continue
        family = families.setdefault(name, KeyFamily(name, must_expire=must_expire(name, prefix)))
        family.count += 1
        family.bytes += size if isinstance(size, int) else 0
        family.no_ttl += ttl == -1


def check_key_ttls(report: KeyReport) -> list[Check]:
    """A warning for each family whose keys must expire but some never will."""
    total = sum(f.bytes for f in report.families)
    ours = sum(f.count for f in report.families)
    scope = f"first {report.scanned}" if report.capped else f"{report.scanned}"
    out = [Check("redis keys", True, f"{scope} keys scanned, {ours} of voxqueue and Celery "
                 f"in {len(report.families)} families: {human_bytes(total)}")]
    for f in report.families:
        if f.must_expire and f.no_ttl:
            out.append(Check(f"keys: {f.name}", False, f"{f.no_ttl} of {f.count} keys have no TTL",
                             "they grow without bound: whatever writes them must EXPIRE them",
                             warning=True))
    return out


def check_keys(client: redis.Redis, settings: Settings) -> tuple[list[Check], KeyReport | None]:
    try:
        report = scan_key_families(client, settings.redis.key_prefix)
    except redis.RedisError as exc:
        return [Check("redis keys", True, f"not measured: {exc}", warning=True)], None
    return check_key_ttls(report), report


def human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def check_up_processes(settings: Settings) -> tuple[Check, UpProcesses]:
    """The processes of the ``voxqueue up`` running with this data folder, and their memory
    (:mod:`voxqueue.up.running`); none is no problem (a deployment runs no ``up``)."""
    found = up_processes(data_dir(settings) / RUNNING_FILE)
    if not found.processes:
        return Check("voxqueue up", True, found.problem), found
    total = found.total()
    pss = f", {human_bytes(total.pss)} PSS" if total.pss is not None else ""
    return Check("voxqueue up", True, f"pid {found.processes[0].pid}: {len(found.processes)} "
                 f"processes, {human_bytes(total.rss)} resident in all{pss} (each below)"), found


@dataclass
class Diagnosis:
    checks: list[Check]
    keys: KeyReport | None = None
    """Memory per key family (None when Redis could not be reached)."""
    up: UpProcesses | None = None
    """The processes of a ``voxqueue up`` on this machine, with their memory."""


def diagnose(settings: Settings) -> Diagnosis:
    """Every check, and the memory per key family."""
    sentinels = check_sentinels(settings)
    if sentinels is not None and not sentinels.ok:
        return Diagnosis([sentinels, *check_flower(settings), *check_providers(settings)])
    redis_check, client = check_redis(settings)
    found = Diagnosis([redis_check] if sentinels is None else [sentinels, redis_check])
    if client is not None:
        found.checks += check_persistence(client)
        found.checks += check_workers(settings)
        found.checks.append(check_beat(client, settings))
        found.checks += [Check(*row, warning=not row[1]) for row in doctor_rows(client)]
        key_checks, found.keys = check_keys(client, settings)
        found.checks += key_checks
    found.checks += check_flower(settings)
    found.checks += check_providers(settings)
    up_check, found.up = check_up_processes(settings)
    found.checks.append(up_check)
    return found


def run_checks(settings: Settings) -> list[Check]:
    return diagnose(settings).checks


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
    client = connect(settings, patient=False)
    try:
        client.ping()
    except redis.RedisError:
        return out
    try:
        return [*out, check_appendfsync(client, settings), check_housekeeping(client, settings)]
    finally:
        client.close()
