"""Monitors: what to watch, how often, and whom to tell; stored in Redis.

A monitor's definition (a hash field of JSON per monitor) is kept apart from its state (a hash
per monitor, written by the checks), so redefining a monitor never loses its state.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import httpx
import redis
from pydantic import BaseModel, ConfigDict, Field, model_validator

from voxqueue.keys import Keys
from voxqueue.settings import QUEUES, Settings
from workers.monitor.conditions import Condition, parse
from workers.tool_registry.context import owner_of

Kind = Literal["http", "json", "queue_depth", "workers_missing", "provider_errors"]
KINDS: tuple[str, ...] = Kind.__args__  # type: ignore[attr-defined]
State = Literal["unknown", "ok", "alerting", "error"]
PROVIDER_STAGES = ("stt", "llm", "tts")
NAME_PATTERN = r"^[a-z0-9][a-z0-9_.-]{0,62}$"

#: The alert condition used when none is given (json has none: say which value to watch).
DEFAULT_CONDITIONS: dict[str, str] = {
    "http": "status >= 400",
    "queue_depth": "> 100",
    "workers_missing": "< 1",
    "provider_errors": "> 0.5",
}
#: Fields a condition may name, per kind ("" is the check's main value); json: any path.
FIELDS: dict[str, set[str]] = {
    "http": {"", "status", "latency"},
    "queue_depth": {"", "value", "depth"},
    "workers_missing": {"", "value", "workers"},
    "provider_errors": {"", "value", "rate"},
}


class Monitor(BaseModel):
    """What to check, when to alert, how often, and who hears the alert."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=NAME_PATTERN)
    kind: Kind
    target: str = ""
    """A URL (http, json), queue names (queue_depth, workers_missing), a provider stage."""
    condition: str = ""
    """When to alert (see workers.monitor.conditions); empty: the kind's default."""
    every: float = Field(gt=0)
    """Seconds between checks."""
    session_id: str | None = None
    device: str | None = None
    urgent: bool = True
    """Announce failures on the device at once (not only at the next turn)."""
    origin: Literal["tool", "settings"] = "tool"
    """Informative only: what a monitor may do is decided by :func:`from_settings`, from the
    process's own settings, never from this field (anyone writing Redis could set it)."""
    created_at: float = Field(default_factory=time.time)

    @model_validator(mode="after")
    def _check(self) -> Monitor:
        self.target = self.target.strip()
        if self.kind in ("http", "json"):
            check_http_url(self.target)
        elif self.kind == "queue_depth" and self.target and self.target not in QUEUES:
            raise ValueError(f"unknown queue {self.target!r}; queues: {', '.join(QUEUES)}")
        elif self.kind == "workers_missing":
            unknown = set(self.queues) - set(QUEUES)
            if unknown:
                raise ValueError(f"unknown queue(s) {sorted(unknown)}; queues: {', '.join(QUEUES)}")
        elif self.kind == "provider_errors" and self.target not in ("", *PROVIDER_STAGES):
            raise ValueError(
                f"provider_errors watches stt, llm or tts (or all: empty), not {self.target!r}"
            )
        if not self.condition.strip():
            if self.kind not in DEFAULT_CONDITIONS:
                raise ValueError(
                    "a json monitor needs a condition such as "
                    "'bitcoin.usd > 70000' (a dotted path, an operator, a number)"
                )
            self.condition = DEFAULT_CONDITIONS[self.kind]
        parsed = self.parsed_condition
        allowed = FIELDS.get(self.kind)
        if allowed is not None and not parsed.fields <= allowed:
            raise ValueError(
                f"a {self.kind} condition can use {sorted(allowed - {''})} "
                f"(or no name), not {sorted(parsed.fields - allowed)}"
            )
        return self

    @property
    def owner(self) -> str | None:
        """Who made it and may see it through the tools: ``device:<name>``, else
        ``session:<id>`` (as the tools' own state is keyed); None when neither is set."""
        if not self.device and not self.session_id:
            return None
        return owner_of(self.device, self.session_id)

    @property
    def parsed_condition(self) -> Condition:
        return parse(self.condition)

    @property
    def queues(self) -> list[str]:
        """The queues a queue_depth / workers_missing monitor watches (all when none named)."""
        named = [q.strip() for q in self.target.split(",") if q.strip()]
        return named or list(QUEUES)

    def describe(self) -> str:
        """One spoken-style line: what is watched and when it alerts."""
        what = {
            "http": f"{self.target}",
            "json": f"{self.target}",
            "queue_depth": f"the {self.target or 'total'} queue depth",
            "workers_missing": f"workers on {', '.join(self.queues)}",
            "provider_errors": f"the {self.target or 'provider'} error rate",
        }[self.kind]
        return f"{self.label}: {what}, every {self.every:g} s, alert when {self.condition}"

    @property
    def label(self) -> str:
        """The name its owner gave it: ``name`` without the owner's tag (see ``scoped_name``)."""
        who = self.owner
        tag = f".{owner_tag(who)}" if who else ""
        return self.name.removesuffix(tag) if tag and self.name.endswith(tag) else self.name


def owner_tag(owner: str) -> str:
    """A short, stable tag of an owner (``device:<name>``, ``session:<id>``)."""
    return hashlib.sha256(owner.encode()).hexdigest()[:6]


def scoped_name(label: str, owner: str) -> str:
    """The stored name of a monitor ``owner`` calls ``label``: monitors made by voice live in
    their owner's namespace, so no owner can learn another's names by colliding with them."""
    return f"{label[:56]}.{owner_tag(owner)}"


def settings_monitors(
    settings: Settings, on_invalid: Callable[[dict[str, Any], str], None] | None = None
) -> list[Monitor]:
    """The valid monitors of ``VOXQUEUE_MONITORS`` (``session`` may name ``session_id``);
    each invalid one is passed to ``on_invalid`` with the reason, and skipped."""
    found: list[Monitor] = []
    for raw in settings.monitors.configured:
        spec = dict(raw)
        if "session" in spec:
            spec["session_id"] = spec.pop("session")
        try:
            found.append(Monitor.model_validate({**spec, "origin": "settings"}))
        except ValueError as exc:
            if on_invalid is not None:
                on_invalid(raw, str(exc))
    return found


def from_settings(monitor: Monitor, settings: Settings) -> bool:
    """Whether ``monitor`` is one the operator configured in this process's settings (same
    name, kind and target), the only ones that may reach private addresses."""
    return any(m.name == monitor.name and m.kind == monitor.kind and m.target == monitor.target
               for m in settings_monitors(settings))


def check_http_url(url: str) -> None:
    """Raise ValueError unless ``url`` is an http(s) URL with a host."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError) as exc:
        raise ValueError(f"invalid URL {url!r}: {exc}") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise ValueError(f"the target must be an http or https URL, not {url!r}")


def name_for(kind: str, target: str) -> str:
    """A readable default name: the kind and the target's host (or queue, or stage)."""
    base = target
    if kind in ("http", "json"):
        try:
            url = httpx.URL(target)
            base = f"{url.host}{url.path}" if url.path not in ("", "/") else url.host
        except (httpx.InvalidURL, TypeError):
            base = target
    slug = re.sub(r"[^a-z0-9]+", "-", base.lower()).strip("-")
    return (f"{kind.replace('_', '-')}-{slug}" if slug else kind.replace("_", "-"))[:60]


@dataclass(frozen=True)
class MonitorState:
    state: State
    since: float | None
    checked_at: float | None
    value: Any
    detail: str
    checks: int
    alerts: int

    @classmethod
    def from_hash(cls, raw: dict[Any, Any]) -> MonitorState:
        fields = {
            (k.decode() if isinstance(k, bytes) else str(k)): (
                v.decode() if isinstance(v, bytes) else str(v)
            )
            for k, v in raw.items()
        }

        def number(name: str) -> float | None:
            return float(fields[name]) if name in fields else None

        value = fields.get("value")
        return cls(
            state=fields.get("state", "unknown"),  # type: ignore[arg-type]
            since=number("since"),
            checked_at=number("checked_at"),
            value=json.loads(value) if value else None,
            detail=fields.get("detail", ""),
            checks=int(fields.get("checks", 0)),
            alerts=int(fields.get("alerts", 0)),
        )


class MonitorStore:
    """Monitor definitions and states in Redis."""

    def __init__(self, r: redis.Redis, keys: Keys) -> None:
        self.r = r
        self.keys = keys

    def save(self, monitor: Monitor, *, replace: bool = False) -> bool:
        """Store the definition; without ``replace`` only when the name is free."""
        data = monitor.model_dump_json()
        if replace:
            self.r.hset(self.keys.monitors(), monitor.name, data)
            return True
        return bool(self.r.hsetnx(self.keys.monitors(), monitor.name, data))

    def get(self, name: str) -> Monitor | None:
        raw: Any = self.r.hget(self.keys.monitors(), name)
        return Monitor.model_validate_json(raw) if raw is not None else None

    def all(self) -> list[Monitor]:
        raw: Any = self.r.hgetall(self.keys.monitors())
        found = [Monitor.model_validate_json(v) for v in raw.values()]
        return sorted(found, key=lambda m: m.name)

    def count(self) -> int:
        return int(self.r.hlen(self.keys.monitors()))

    def delete(self, name: str) -> bool:
        pipe = self.r.pipeline(transaction=True)
        pipe.hdel(self.keys.monitors(), name)
        pipe.delete(self.keys.monitor_state(name))
        return bool(pipe.execute()[0])

    def state(self, name: str) -> MonitorState:
        raw: Any = self.r.hgetall(self.keys.monitor_state(name))
        return MonitorState.from_hash(raw)
