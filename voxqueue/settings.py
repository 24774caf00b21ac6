"""Typed settings read from the environment (``VOXQUEUE_*``) and ``.env``, in parts.

Each part is a small :class:`pydantic_settings.BaseSettings` of its own that a process can load
alone (``RedisSettings()``), with the environment names it has always had: an ``env_prefix`` per
part (``VOXQUEUE_GATEWAY_`` for the gateway's ``port``), and a ``validation_alias`` where a
field's short name inside its part is not its variable (``settings.redis.url`` is
``VOXQUEUE_REDIS_URL``). :class:`Settings` composes the parts as fields built by
``default_factory``, so each part reads the environment itself, and only when it is not given.
The composition is a plain pydantic model, not a ``BaseSettings``: a part is never looked up as
a JSON variable of its own (``VOXQUEUE_STT`` is a provider's name, not a part), and a name that
is not a part is refused (``extra="forbid"``) instead of being ignored. One flat class with
aliases, or nested ``BaseSettings`` with ``env_nested_delimiter``, would have changed the
names or loaded everything everywhere.

Workers and the command line load :class:`Settings`; the gateway and the edge load
:class:`ClientSettings` (Redis, the turns' limits, the gateway, traces and logs), the edge
besides its own ``edge.settings.EdgeSettings``. An override names its part,
``Settings(redis=RedisSettings(url=url))`` (the other fields of that part, and the other parts,
still come from the environment), or changes a copy: ``settings.replace(redis={"url": url})``.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from voxqueue.settings_gateway import GatewaySettings
from voxqueue.settings_providers import (
    WHISPER_BASE_PACKAGES,
    MissingKeyError,
    ProviderSettings,
    whisper_installed,
)
from voxqueue.settings_tools import ToolSettings

QUEUES: tuple[str, ...] = ("stt", "agent", "tools", "tts", "monitor")


class RedisSettings(BaseSettings):
    """Redis, which is the broker, the result backend and the shared state (``settings.redis``)."""

    model_config = SettingsConfigDict(
        env_prefix="VOXQUEUE_", env_file=".env", extra="ignore", populate_by_name=True
    )

    url: str = Field(default="redis://127.0.0.1:6379/0", validation_alias="VOXQUEUE_REDIS_URL")
    """Broker, result backend and shared state; auth and TLS go in the URL (``rediss://``).
    Redis Sentinel in Celery's own form, ``sentinel://h1:26379;sentinel://h2:26379/0`` (the
    primary's password as ``sentinel://:PASSWORD@h1:26379``), with ``VOXQUEUE_REDIS_MASTER``."""
    master: str | None = Field(default=None, validation_alias="VOXQUEUE_REDIS_MASTER")
    """With a ``sentinel://`` URL: the name the sentinels know the primary by."""
    sentinel_password: SecretStr | None = Field(
        default=None, validation_alias="VOXQUEUE_REDIS_SENTINEL_PASSWORD")
    """With a ``sentinel://`` URL: the sentinels' own password, if they have one."""
    wait_replicas: int | None = Field(default=None, ge=0,
                                      validation_alias="VOXQUEUE_REDIS_WAIT_REPLICAS")
    """Replicas that must hold a once-write (a side effect's claim, a stage's done marker, a
    history append, a turn's creation), a turn's state (a piece of speech's number, a sentence
    spoken), a timer's firing, a job's delivery and a published job before the system acts on
    it (Redis ``WAIT``), so a failover cannot undo them. Unset: 1 with a ``sentinel://`` URL,
    else 0 (no replica)."""
    wait_ms: int = Field(default=200, ge=1, validation_alias="VOXQUEUE_REDIS_WAIT_MS")
    """The longest such a write waits for its replicas; then it goes on unconfirmed (logged),
    and writes wait at most 10 ms until the primary has its replicas in sync again."""
    key_prefix: str = "vq"
    visibility_timeout: int = 6
    """The lease, in seconds: a worker renews the tasks it holds every quarter of it, and a dead
    worker's tasks run again on another one after at most this (plus a 1 s sweep). Every
    worker and client must use the same value: the shortest one seen anywhere wins."""
    max_deliveries: int = 3
    """A task delivered this many times without finishing ends its turn with an error."""
    data_dir: Path | None = None
    """Where ``voxqueue up``'s embedded Redis keeps its data (one ``up`` at a time); unset:
    ``$XDG_DATA_HOME/voxqueue`` (``~/.local/share/voxqueue``)."""
    appendfsync: Literal["always", "everysec"] = Field(
        default="always", validation_alias="VOXQUEUE_REDIS_APPENDFSYNC")
    """fsync of the embedded Redis's append-only file (deploy/ uses the same). ``always``: an
    acknowledged write survives a crash of Redis or of the machine; ``everysec`` is faster, but
    a crash can lose a second of writes, so a once-claim may be undone after its effect."""
    crash_at: str = ""
    """Tests only: crash points that SIGKILL the process (``workers/runtime/crash.py``)."""


class TurnSettings(BaseSettings):
    """A turn's deadline, lifetimes and the sizes it may have (``settings.turns``): what every
    client checks before it stores anything, the gateway included."""

    model_config = SettingsConfigDict(
        env_prefix="VOXQUEUE_", env_file=".env", extra="ignore", populate_by_name=True
    )

    # -- turns ------------------------------------------------------------------------------
    deadline_s: float = Field(default=60.0, validation_alias="VOXQUEUE_TURN_DEADLINE_S")
    """Past it every stage stops and the turn ends with ``timeout``."""
    max_deadline_s: float = 300.0
    """The longest deadline a turn may ask for; the gateway and every worker enforce it."""
    ttl_s: int = Field(default=3600, validation_alias="VOXQUEUE_TURN_TTL_S")
    """How long a turn's events, audio and state stay in Redis."""
    session_ttl_s: int = 7 * 24 * 3600

    # -- audio limits (checked by the client before anything is stored) ----------------------
    max_audio_bytes: int = 10 * 1024 * 1024
    max_audio_seconds: float = 60.0
    max_text_chars: int = 4000
    sample_rate: int = 16000
    reply_max_chars: int = Field(default=1500, ge=1)
    """The longest reply of a turn, in characters (what the model says in all of the turn's
    steps): a longer one is cut at its last sentence end that fits (else its last whole word)
    before it is spoken or recorded, and the history records it as it was said. A gateway
    device's spoken turn holds this much of its characters budget until its reply is
    recorded (or the turn ends)."""


class AgentSettings(BaseSettings):
    """The agent: its prompt, steps, context window and how its reply goes to speech
    (``settings.agent``)."""

    model_config = SettingsConfigDict(
        env_prefix="VOXQUEUE_", env_file=".env", extra="ignore", populate_by_name=True
    )

    # -- the model ----------------------------------------------------------------------------
    system_prompt: str = (
        "You are voxqueue, a helpful voice assistant. Your replies are read aloud: answer in "
        "one to three short sentences as a person would say them, with no markdown, lists, "
        "links, emoji or ids. Use the tools when they help."
    )
    max_steps: int = 8
    """LLM calls per turn."""
    max_tool_calls_per_answer: int = Field(default=8, ge=1)
    """Tool calls run from one model answer; further ones get an error message instead."""

    # -- context window ---------------------------------------------------------------------
    context_limits: dict[str, int] = Field(default_factory=lambda: {
        "gpt-4o-mini": 128_000, "gpt-4o": 128_000, "gpt-4.1": 1_047_576,
        "gpt-4.1-mini": 1_047_576, "gpt-4.1-nano": 1_047_576, "gpt-5": 400_000,
        "o3": 200_000, "o4-mini": 200_000,
    })
    """Context window (tokens) per model name or name prefix (JSON in the environment)."""
    default_context_limit: int = 8192
    """Context window of a model not in ``context_limits``."""
    context_threshold: float = Field(default=0.8, gt=0, le=1)
    """Compact the history when a request reaches this share of the context window."""
    keep_recent_turns: int = Field(default=4, ge=1)
    """Turns kept verbatim when older history is summarized."""

    # -- the reply's speech ------------------------------------------------------------------
    speak_while_thinking: bool = True
    """Send each sentence to TTS as soon as the LLM has written it (off: after the reply)."""
    speech_filter: bool = True
    """Give the voice text for the ear: markdown, URLs, emoji and ids dropped, units, times and
    money in words as the engine reads them right (voxqueue/spoken). The reply text in events
    and history is the model's (a reply cut to ``VOXQUEUE_REPLY_MAX_CHARS`` is recorded as it
    was said). Off: the voice is given the model's text as written."""
    gather_sentences: bool = True
    """Once the reply's first piece is out, later sentences wait to go to TTS together while the
    listener has enough audio in hand (fewer, longer TTS requests: less CPU per turn and one
    voice across them). Off: each sentence is a TTS job of its own."""
    first_phrase_words: int = Field(default=4, ge=0)
    """The reply's first piece may end before a phrase-opening word ("in", "with", "because"…)
    once it has this many words, so speech starts sooner (0: first piece is a whole sentence
    or clause)."""


class MonitorSettings(BaseSettings):
    """Monitors and the alerts they leave for the next turn (``settings.monitors``)."""

    model_config = SettingsConfigDict(
        env_prefix="VOXQUEUE_MONITOR_", env_file=".env", extra="ignore", populate_by_name=True
    )

    configured: list[dict[str, Any]] = Field(default_factory=list,
                                            validation_alias="VOXQUEUE_MONITORS")
    """Monitors created when beat starts: ``{"name", "kind", "target", "condition", "every",
    "device"?, "session"?}`` (JSON in the environment)."""
    min_every_s: float = 10.0
    max_count: int = 100
    creates_per_hour: int = Field(default=10, ge=0)
    """Monitors one owner (a device, else a session) may create through the tool per hour."""
    error_window_s: float = 300.0
    """How far back the provider error-rate monitor looks, in seconds."""
    alert_max_chars: int = Field(default=300, ge=20, validation_alias="VOXQUEUE_ALERT_MAX_CHARS")
    """Characters of one monitor alert shown to the model (the rest is cut)."""
    alerts_max_per_turn: int = Field(default=5, ge=1,
                                     validation_alias="VOXQUEUE_ALERTS_MAX_PER_TURN")
    """Monitor alerts shown to the model at the start of one turn (older ones are counted)."""


class WyomingSettings(BaseSettings):
    """Where ``voxqueue wyoming`` listens and whom it answers (``settings.wyoming``); what its
    clients' turns may do is :class:`voxqueue.wyoming.guard.WyomingPolicy`."""

    model_config = SettingsConfigDict(
        env_prefix="VOXQUEUE_WYOMING_", env_file=".env", extra="ignore", populate_by_name=True
    )

    uri: str = "tcp://127.0.0.1:10300"
    """Where the Wyoming server listens (``tcp://0.0.0.0:10300`` for Home Assistant on another
    host). Wyoming has no authentication: keep it on a trusted network."""
    allow: str = "127.0.0.0/8,::1/128"
    """Networks whose clients the Wyoming server answers (comma-separated); others are closed
    at once. The default: loopback only; set it to Home Assistant's address (``10.0.0.5/32``)."""
    max_event_bytes: int = 1024 * 1024
    """The largest Wyoming event (header data plus payload) a client may send."""


class DashboardSettings(BaseSettings):
    """Flower and the Prometheus exporter (``settings.dashboard``)."""

    model_config = SettingsConfigDict(
        env_prefix="VOXQUEUE_", env_file=".env", extra="ignore", populate_by_name=True
    )

    flower_port: int = 5555
    flower_max_tasks: int = Field(default=50_000, ge=100)
    """Tasks Flower keeps (its ``--max_tasks``; its own default, 10,000, is a few hours of
    turns): the oldest are forgotten first."""
    flower_user: str = "admin"
    flower_password: SecretStr | None = None
    """Flower's basic-auth password. Unset, or the old default ``voxqueue`` (refused): a random
    one is made once and kept in ``flower_password_file``."""
    flower_password_file: Path | None = None
    """Where the made-up Flower password is kept (mode 0600); unset:
    ``$XDG_CONFIG_HOME/voxqueue/flower-password`` (``~/.config/voxqueue/flower-password``)."""

    metrics_port: int = 9464
    """Port of the Prometheus exporter (``voxqueue exporter``, started by ``voxqueue up``)."""


class ObservabilitySettings(BaseSettings):
    """Traces and logs (``settings.observability``): every process that starts or runs a turn
    reads them, the gateway and a device's client included."""

    model_config = SettingsConfigDict(
        env_prefix="VOXQUEUE_", env_file=".env", extra="ignore", populate_by_name=True
    )

    # -- traces (the ``otel`` extra) -----------------------------------------------------------
    otel_enabled: bool = False
    """One OpenTelemetry trace per turn across all queues (voxqueue/observability/otel.py)."""
    otel_exporter: str = "otlp"
    """``otlp`` (OTLP/HTTP, set by the ``OTEL_EXPORTER_OTLP_*`` variables), ``console``, or
    ``jsonl:/path/file`` (one JSON object per finished span)."""
    otel_service_name: str = "voxqueue"

    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"


class ClientSettings(BaseModel):
    """What a client of the queues loads (the gateway's process, the edge, ``Client``): Redis,
    the turns' limits, the gateway, traces and logs. Each part comes from the environment unless
    given."""

    model_config = ConfigDict(extra="forbid")

    redis: RedisSettings = Field(default_factory=RedisSettings)
    turns: TurnSettings = Field(default_factory=TurnSettings)
    gateway: GatewaySettings = Field(default_factory=GatewaySettings)
    observability: ObservabilitySettings = Field(default_factory=ObservabilitySettings)

    def replace(self, **changes: dict[str, Any]) -> Self:
        """A copy with some fields of some parts changed, the rest kept as they are:
        ``settings.replace(redis={"url": url})``. A name that is not a part's field raises."""
        parts: dict[str, BaseSettings] = {}
        for name, fields in changes.items():
            part = getattr(self, name, None)
            if not isinstance(part, BaseSettings):
                raise TypeError(f"{type(self).__name__} has no part {name!r}")
            if unknown := set(fields) - set(type(part).model_fields):
                raise TypeError(f"{type(part).__name__} has no field {', '.join(sorted(unknown))}")
            parts[name] = part.model_copy(update=fields)
        return self.model_copy(update=parts)


class Settings(ClientSettings):
    """Everything voxqueue reads from its environment, in parts; what the workers and the
    command line load. ``Settings(tools=ToolSettings(modules="x"))`` overrides one part."""

    providers: ProviderSettings = Field(default_factory=ProviderSettings)
    agent: AgentSettings = Field(default_factory=AgentSettings)
    tools: ToolSettings = Field(default_factory=ToolSettings)
    monitors: MonitorSettings = Field(default_factory=MonitorSettings)
    wyoming: WyomingSettings = Field(default_factory=WyomingSettings)
    dashboard: DashboardSettings = Field(default_factory=DashboardSettings)


#: Every part, in the order docs/settings.md shows them.
PARTS: tuple[type[BaseSettings], ...] = (
    RedisSettings, TurnSettings, ProviderSettings, AgentSettings, ToolSettings, MonitorSettings,
    WyomingSettings, GatewaySettings, DashboardSettings, ObservabilitySettings)


def ignore_dotenv() -> None:
    """From now on every part reads the process's environment only, never a ``.env`` file
    (tests and benchmarks call it once, so a developer's ``.env`` cannot leak into them)."""
    for part in PARTS:
        part.model_config["env_file"] = None


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process's settings, read once."""
    return Settings()


@lru_cache(maxsize=1)
def get_client_settings() -> ClientSettings:
    """A client process's settings (the gateway, the edge), read once."""
    return ClientSettings()


__all__ = [
    "PARTS", "QUEUES", "WHISPER_BASE_PACKAGES", "AgentSettings", "ClientSettings",
    "DashboardSettings",
    "GatewaySettings", "MissingKeyError", "MonitorSettings", "ObservabilitySettings",
    "ProviderSettings", "RedisSettings", "Settings", "ToolSettings", "TurnSettings",
    "WyomingSettings", "get_client_settings", "get_settings", "ignore_dotenv",
    "whisper_installed",
]
