"""The settings in parts keep every environment name they had as one class.

``BEFORE`` is every variable docs/settings.md listed on main before the split (commit
cd30749, one ``Settings`` of 122 fields plus the edge's and Wyoming's own classes), with where
each one lands now: ``part.field`` of :class:`Settings`, or ``Class.field`` of a class loaded on
its own. Each variable, set alone, must land there, whether its part is loaded alone or
through ``Settings`` (and ``ClientSettings`` for the client's parts), and nowhere else.
"""

from __future__ import annotations

import ast
import json
import types
import typing
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr, ValidationError
from pydantic_settings import BaseSettings

from edge.settings import EdgeSettings
from voxqueue.cli_settings_doc import CLASSES, every_name
from voxqueue.settings import (
    PARTS,
    ClientSettings,
    RedisSettings,
    Settings,
    ToolSettings,
)
from voxqueue.wyoming.guard import WyomingPolicy

ROOT = Path(__file__).resolve().parents[2]
ALONE: dict[str, type[BaseSettings]] = {"EdgeSettings": EdgeSettings,
                                         "WyomingPolicy": WyomingPolicy}
PREFIXES = ("VOXQUEUE_", "OPENAI_", "ELEVENLABS_")
#: Values the generic :func:`sample` cannot make (a validator wants one of a few words).
SPECIAL = {"EdgeSettings.silence": "relaxed", "EdgeSettings.wake_words": "alexa"}

BEFORE: dict[str, str] = {
    "ELEVENLABS_API_KEY": "providers.elevenlabs_api_key",
    "OPENAI_API_KEY": "providers.openai_api_key",
    "OPENAI_BASE_URL": "providers.openai_base_url",
    "VOXQUEUE_ALERTS_MAX_PER_TURN": "monitors.alerts_max_per_turn",
    "VOXQUEUE_ALERT_MAX_CHARS": "monitors.alert_max_chars",
    "VOXQUEUE_CONFIRM_TTL_S": "tools.confirm_ttl_s",
    "VOXQUEUE_CONTEXT_LIMITS": "agent.context_limits",
    "VOXQUEUE_CONTEXT_THRESHOLD": "agent.context_threshold",
    "VOXQUEUE_CRASH_AT": "redis.crash_at",
    "VOXQUEUE_DATA_DIR": "redis.data_dir",
    "VOXQUEUE_DEFAULT_CONTEXT_LIMIT": "agent.default_context_limit",
    "VOXQUEUE_DEVICE_TOKEN": "gateway.device_token",
    "VOXQUEUE_EDGE_COOLDOWN_S": "EdgeSettings.cooldown_s",
    "VOXQUEUE_EDGE_DEADLINE_S": "EdgeSettings.deadline_s",
    "VOXQUEUE_EDGE_DEVICE": "EdgeSettings.device",
    "VOXQUEUE_EDGE_DIRECT_REDIS": "EdgeSettings.direct_redis",
    "VOXQUEUE_EDGE_EARCONS": "EdgeSettings.earcons",
    "VOXQUEUE_EDGE_END_EARLY_S": "EdgeSettings.end_early_s",
    "VOXQUEUE_EDGE_FOLLOW_UP_S": "EdgeSettings.follow_up_s",
    "VOXQUEUE_EDGE_INPUT_DEVICE": "EdgeSettings.input_device",
    "VOXQUEUE_EDGE_MAX_SECONDS": "EdgeSettings.max_seconds",
    "VOXQUEUE_EDGE_NO_SPEECH_S": "EdgeSettings.no_speech_s",
    "VOXQUEUE_EDGE_OUTPUT_DEVICE": "EdgeSettings.output_device",
    "VOXQUEUE_EDGE_PREROLL_S": "EdgeSettings.preroll_s",
    "VOXQUEUE_EDGE_SESSION": "EdgeSettings.session",
    "VOXQUEUE_EDGE_SESSION_IDLE_S": "EdgeSettings.session_idle_s",
    "VOXQUEUE_EDGE_SILENCE": "EdgeSettings.silence",
    "VOXQUEUE_EDGE_SPEECH_START_S": "EdgeSettings.speech_start_s",
    "VOXQUEUE_EDGE_STREAM": "EdgeSettings.stream",
    "VOXQUEUE_EDGE_UNFINISHED_WAIT_S": "EdgeSettings.unfinished_wait_s",
    "VOXQUEUE_EDGE_VAD": "EdgeSettings.vad",
    "VOXQUEUE_EDGE_VAD_AGGRESSIVENESS": "EdgeSettings.vad_aggressiveness",
    "VOXQUEUE_EDGE_VAD_THRESHOLD": "EdgeSettings.vad_threshold",
    "VOXQUEUE_EDGE_WAKE_CUTOFF": "EdgeSettings.wake_cutoff",
    "VOXQUEUE_EDGE_WAKE_ENGINE": "EdgeSettings.wake_engine",
    "VOXQUEUE_EDGE_WAKE_WORDS": "EdgeSettings.wake_words",
    "VOXQUEUE_ELEVENLABS_API_KEY": "providers.elevenlabs_api_key",
    "VOXQUEUE_ELEVENLABS_BASE_URL": "providers.elevenlabs_base_url",
    "VOXQUEUE_FETCH_ALLOWED_HOSTS": "tools.fetch_allowed_hosts",
    "VOXQUEUE_FETCH_MAX_BYTES": "tools.fetch_max_bytes",
    "VOXQUEUE_FETCH_TIMEOUT_S": "tools.fetch_timeout_s",
    "VOXQUEUE_FIRST_PHRASE_WORDS": "agent.first_phrase_words",
    "VOXQUEUE_FLOWER_MAX_TASKS": "dashboard.flower_max_tasks",
    "VOXQUEUE_FLOWER_PASSWORD": "dashboard.flower_password",
    "VOXQUEUE_FLOWER_PASSWORD_FILE": "dashboard.flower_password_file",
    "VOXQUEUE_FLOWER_PORT": "dashboard.flower_port",
    "VOXQUEUE_FLOWER_USER": "dashboard.flower_user",
    "VOXQUEUE_GATEWAY_ALLOW_HTTP": "gateway.allow_http",
    "VOXQUEUE_GATEWAY_AUDIO_SECONDS_PER_HOUR": "gateway.audio_seconds_per_hour",
    "VOXQUEUE_GATEWAY_AUDIO_SECONDS_PER_MINUTE": "gateway.audio_seconds_per_minute",
    "VOXQUEUE_GATEWAY_BODY_TIMEOUT_S": "gateway.body_timeout_s",
    "VOXQUEUE_GATEWAY_CA_FILE": "gateway.ca_file",
    "VOXQUEUE_GATEWAY_HEADER_TIMEOUT_S": "gateway.header_timeout_s",
    "VOXQUEUE_GATEWAY_HOST": "gateway.host",
    "VOXQUEUE_GATEWAY_IDLE_TIMEOUT_S": "gateway.idle_timeout_s",
    "VOXQUEUE_GATEWAY_MAX_CONNECTIONS": "gateway.max_connections",
    "VOXQUEUE_GATEWAY_POLLS_PER_DEVICE": "gateway.polls_per_device",
    "VOXQUEUE_GATEWAY_PORT": "gateway.port",
    "VOXQUEUE_GATEWAY_REDIS_POOL": "gateway.redis_pool",
    "VOXQUEUE_GATEWAY_REPLY_TTL_S": "gateway.reply_ttl_s",
    "VOXQUEUE_GATEWAY_REVOCATION_CHECK_S": "gateway.revocation_check_s",
    "VOXQUEUE_GATEWAY_SOCKETS_PER_DEVICE": "gateway.sockets_per_device",
    "VOXQUEUE_GATEWAY_SPEAK_CHARS_PER_HOUR": "gateway.speak_chars_per_hour",
    "VOXQUEUE_GATEWAY_SPEAK_CHARS_PER_MINUTE": "gateway.speak_chars_per_minute",
    "VOXQUEUE_GATEWAY_STREAM_GRACE_S": "gateway.stream_grace_s",
    "VOXQUEUE_GATEWAY_STREAM_MAX_FRAMES": "gateway.stream_max_frames",
    "VOXQUEUE_GATEWAY_TURNS_PER_HOUR": "gateway.turns_per_hour",
    "VOXQUEUE_GATEWAY_TURNS_PER_MINUTE": "gateway.turns_per_minute",
    "VOXQUEUE_GATEWAY_URL": "gateway.url",
    "VOXQUEUE_GATEWAY_WS_MAX_FRAME_BYTES": "gateway.ws_max_frame_bytes",
    "VOXQUEUE_GATHER_SENTENCES": "agent.gather_sentences",
    "VOXQUEUE_HA_ALLOWED_SERVICES": "tools.ha_allowed_services",
    "VOXQUEUE_HA_EXPOSED_ENTITIES": "tools.ha_exposed_entities",
    "VOXQUEUE_HOME_ASSISTANT_TOKEN": "tools.home_assistant_token",
    "VOXQUEUE_HOME_ASSISTANT_URL": "tools.home_assistant_url",
    "VOXQUEUE_KEEP_RECENT_TURNS": "agent.keep_recent_turns",
    "VOXQUEUE_KEY_PREFIX": "redis.key_prefix",
    "VOXQUEUE_LLM": "providers.llm",
    "VOXQUEUE_LLM_MODEL": "providers.llm_model",
    "VOXQUEUE_LLM_TEMPERATURE": "providers.llm_temperature",
    "VOXQUEUE_LOG_LEVEL": "observability.log_level",
    "VOXQUEUE_MAX_AUDIO_BYTES": "turns.max_audio_bytes",
    "VOXQUEUE_MAX_AUDIO_SECONDS": "turns.max_audio_seconds",
    "VOXQUEUE_MAX_DEADLINE_S": "turns.max_deadline_s",
    "VOXQUEUE_MAX_DELIVERIES": "redis.max_deliveries",
    "VOXQUEUE_MAX_STEPS": "agent.max_steps",
    "VOXQUEUE_MAX_TEXT_CHARS": "turns.max_text_chars",
    "VOXQUEUE_MAX_TOOL_CALLS_PER_ANSWER": "agent.max_tool_calls_per_answer",
    "VOXQUEUE_MCP_SERVERS": "tools.mcp_servers",
    "VOXQUEUE_METRICS_PORT": "dashboard.metrics_port",
    "VOXQUEUE_MONITORS": "monitors.configured",
    "VOXQUEUE_MONITOR_CREATES_PER_HOUR": "monitors.creates_per_hour",
    "VOXQUEUE_MONITOR_ERROR_WINDOW_S": "monitors.error_window_s",
    "VOXQUEUE_MONITOR_MAX_COUNT": "monitors.max_count",
    "VOXQUEUE_MONITOR_MIN_EVERY_S": "monitors.min_every_s",
    "VOXQUEUE_NEWS_FEEDS": "tools.news_feeds",
    "VOXQUEUE_NOTIFY_WEBHOOK_URL": "tools.notify_webhook_url",
    "VOXQUEUE_NTFY_URL": "tools.ntfy_url",
    "VOXQUEUE_OPENAI_API_KEY": "providers.openai_api_key",
    "VOXQUEUE_OPENAI_BASE_URL": "providers.openai_base_url",
    "VOXQUEUE_OPENAI_STT_TRANSPORT": "providers.openai_stt_transport",
    "VOXQUEUE_OTEL_ENABLED": "observability.otel_enabled",
    "VOXQUEUE_OTEL_EXPORTER": "observability.otel_exporter",
    "VOXQUEUE_OTEL_SERVICE_NAME": "observability.otel_service_name",
    "VOXQUEUE_PIPER_THREADS": "providers.piper_threads",
    "VOXQUEUE_PIPER_VOICE": "providers.piper_voice",
    "VOXQUEUE_PREFER_LOCAL": "providers.prefer_local",
    "VOXQUEUE_PROVIDER_BACKOFF_MAX_S": "providers.backoff_max_s",
    "VOXQUEUE_PROVIDER_BACKOFF_S": "providers.backoff_s",
    "VOXQUEUE_PROVIDER_MAX_ATTEMPTS": "providers.max_attempts",
    "VOXQUEUE_PROVIDER_TIMEOUT_S": "providers.timeout_s",
    "VOXQUEUE_REDIS_APPENDFSYNC": "redis.appendfsync",
    "VOXQUEUE_REDIS_URL": "redis.url",
    "VOXQUEUE_REPLY_MAX_CHARS": "turns.reply_max_chars",
    "VOXQUEUE_SAMPLE_RATE": "turns.sample_rate",
    "VOXQUEUE_SESSION_TTL_S": "turns.session_ttl_s",
    "VOXQUEUE_SPEAK_WHILE_THINKING": "agent.speak_while_thinking",
    "VOXQUEUE_SPEECH_FILTER": "agent.speech_filter",
    "VOXQUEUE_SPEECH_IDLE_S": "providers.speech_idle_s",
    "VOXQUEUE_SPEECH_PAUSE_S": "providers.speech_pause_s",
    "VOXQUEUE_STT": "providers.stt",
    "VOXQUEUE_STT_DECODE_AT_PAUSES": "providers.stt_decode_at_pauses",
    "VOXQUEUE_STT_MODEL": "providers.stt_model",
    "VOXQUEUE_SYSTEM_PROMPT": "agent.system_prompt",
    "VOXQUEUE_TIMEZONE": "tools.timezone",
    "VOXQUEUE_TOOLS_ALLOW": "tools.allow",
    "VOXQUEUE_TOOLS_DENY": "tools.deny",
    "VOXQUEUE_TOOL_MODULES": "tools.modules",
    "VOXQUEUE_TOOL_RESULT_MAX_CHARS": "tools.result_max_chars",
    "VOXQUEUE_TOOL_TIMEOUT_S": "tools.timeout_s",
    "VOXQUEUE_TTS": "providers.tts",
    "VOXQUEUE_TTS_MODEL": "providers.tts_model",
    "VOXQUEUE_TTS_VOICE": "providers.tts_voice",
    "VOXQUEUE_TURN_DEADLINE_S": "turns.deadline_s",
    "VOXQUEUE_TURN_TTL_S": "turns.ttl_s",
    "VOXQUEUE_URL_ALLOWLIST": "tools.url_allowlist",
    "VOXQUEUE_VISIBILITY_TIMEOUT": "redis.visibility_timeout",
    "VOXQUEUE_WEATHER_FORECAST_URL": "tools.weather_forecast_url",
    "VOXQUEUE_WEATHER_GEOCODING_URL": "tools.weather_geocoding_url",
    "VOXQUEUE_WHISPER_BEAM_SIZE": "providers.whisper_beam_size",
    "VOXQUEUE_WHISPER_CACHE": "providers.whisper_cache",
    "VOXQUEUE_WHISPER_LANGUAGE": "providers.whisper_language",
    "VOXQUEUE_WHISPER_MODEL": "providers.whisper_model",
    "VOXQUEUE_WHISPER_SHORT_WINDOW_S": "providers.whisper_short_window_s",
    "VOXQUEUE_WHISPER_THREADS": "providers.whisper_threads",
    "VOXQUEUE_WIKIPEDIA_URL": "tools.wikipedia_url",
    "VOXQUEUE_WYOMING_ALLOW": "wyoming.allow",
    "VOXQUEUE_WYOMING_DEVICE": "WyomingPolicy.device",
    "VOXQUEUE_WYOMING_MAX_EVENT_BYTES": "wyoming.max_event_bytes",
    "VOXQUEUE_WYOMING_TOOLS": "WyomingPolicy.tools",
    "VOXQUEUE_WYOMING_TURNS_PER_MINUTE": "WyomingPolicy.turns_per_minute",
    "VOXQUEUE_WYOMING_URI": "wyoming.uri",
}

#: Variables added since the split, with where each lands (Redis Sentinel, #46; Whisper's
#: window and pause, #48; the browser page's address, #47; the Responses API, #49).
ADDED: dict[str, str] = {
    "VOXQUEUE_REDIS_MASTER": "redis.master",
    "VOXQUEUE_REDIS_SENTINEL_PASSWORD": "redis.sentinel_password",
    "VOXQUEUE_REDIS_WAIT_REPLICAS": "redis.wait_replicas",
    "VOXQUEUE_REDIS_WAIT_MS": "redis.wait_ms",
    "VOXQUEUE_STT_DECODE_PAUSE_S": "providers.stt_decode_pause_s",
    "VOXQUEUE_WHISPER_FIT_WINDOW": "providers.whisper_fit_window",
    "VOXQUEUE_GATEWAY_PUBLIC_URL": "gateway.public_url",
    "VOXQUEUE_OPENAI_API": "providers.openai_api",
    "VOXQUEUE_OPENAI_ENCRYPTED_REASONING": "providers.openai_encrypted_reasoning",
}
NAMES = BEFORE | ADDED


def test_the_names_are_the_same_before_and_after() -> None:
    assert len(BEFORE) == 152
    assert every_name() == set(BEFORE) | set(ADDED), "a name went, or one came undeclared"


def sample(field: Any, default: Any) -> str:
    """A value for the field's variable, valid and unlike its default."""
    kind = field.annotation
    args = [a for a in typing.get_args(kind) if a is not type(None)]
    if typing.get_origin(kind) is typing.Literal:
        return next(str(a) for a in typing.get_args(kind) if a != default)
    if args and all(isinstance(a, str) for a in args):  # Literal inside Optional
        return next(a for a in args if a != default)
    optional = typing.get_origin(kind) in (typing.Union, types.UnionType)
    base = args[0] if optional and len(args) == 1 else kind
    if base is bool:
        return "false" if default else "true"
    if base is int:
        return str((default or 0) + 1)
    if base is float:
        return "0.5" if default in (None, 0) else str(default / 2)
    if typing.get_origin(base) is dict:
        return json.dumps({"x-test": 1 if typing.get_args(base)[1] is int else "http://x.test"})
    if typing.get_origin(base) is list:
        return json.dumps([{"name": "x-test"}]) if typing.get_args(base)[0] is not str \
            else "alexa"
    return "/tmp/x-test" if base is Path else "x-test"


def plain(value: Any) -> Any:
    return value.get_secret_value() if isinstance(value, SecretStr) else value


def everything(env_file: None = None) -> dict[str, Any]:
    """Every field of every part, and of the classes loaded alone, as loaded now."""
    settings = Settings()
    found = {f"{part}.{name}": plain(value) for part in Settings.model_fields
             for name, value in getattr(settings, part)}
    for label, cls in ALONE.items():
        found |= {f"{label}.{name}": plain(value)
                  for name, value in cls(_env_file=None)}
    return found


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    import os

    for name in list(os.environ):
        if name.startswith(PREFIXES):
            monkeypatch.delenv(name)
    return monkeypatch


@pytest.mark.parametrize("variable", sorted(NAMES))
def test_each_variable_lands_in_its_part_and_nowhere_else(
        clean_env: pytest.MonkeyPatch, variable: str) -> None:
    where = NAMES[variable]
    owner, field_name = where.split(".")
    defaults = everything()
    cls = ALONE[owner] if owner in ALONE else Settings.model_fields[owner].annotation
    assert cls is not None
    value = SPECIAL.get(where) or sample(cls.model_fields[field_name], defaults[where])
    clean_env.setenv(variable, value)
    loaded = everything()
    assert loaded[where] != defaults[where], f"{variable}={value} did not reach {where}"
    changed = {key for key in loaded if loaded[key] != defaults[key]}
    assert changed == {where}
    if owner not in ALONE:  # the part alone, and the client's settings, read it the same
        assert plain(getattr(cls(), field_name)) == loaded[where]
        if owner in ClientSettings.model_fields:
            assert plain(getattr(getattr(ClientSettings(), owner), field_name)) == loaded[where]


def test_every_part_is_composed_and_documented() -> None:
    composed = {field.annotation for field in Settings.model_fields.values()}
    assert composed == set(PARTS)
    documented = {cls for cls, _ in CLASSES}
    assert set(PARTS) <= documented
    assert sum(len(part.model_fields) for part in PARTS) == 122 + len(ADDED)


def test_an_override_names_its_part_and_a_flat_name_is_refused(
        clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("VOXQUEUE_KEY_PREFIX", "from-env")
    settings = Settings(redis=RedisSettings(url="redis://x.test:1/0"))
    assert settings.redis.url == "redis://x.test:1/0"
    assert settings.redis.key_prefix == "from-env"  # the rest of the part: the environment
    with pytest.raises(ValidationError):
        Settings(redis_url="redis://x.test:1/0")  # type: ignore[call-arg]
    copy = settings.replace(tools={"modules": "a, b"}, redis={"key_prefix": "p"})
    assert copy.tools.module_names == ["a", "b"] and copy.redis.key_prefix == "p"
    assert copy.redis.url == settings.redis.url and settings.redis.key_prefix == "from-env"
    with pytest.raises(TypeError, match="no field"):
        settings.replace(tools={"tool_modules": "a"})
    with pytest.raises(TypeError, match="no part"):
        settings.replace(tool={"modules": "a"})
    assert isinstance(Settings().tools, ToolSettings)


def test_a_secret_stays_secret(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("OPENAI_API_KEY", "sk-hidden-123")
    clean_env.setenv("VOXQUEUE_DEVICE_TOKEN", "vqd-hidden-456")
    settings = Settings()
    assert settings.providers.require_openai_key("x") == "sk-hidden-123"
    text = repr(settings) + str(settings) + settings.model_dump_json()
    assert "sk-hidden" not in text and "vqd-hidden" not in text


def imported_names(folder: Path) -> set[str]:
    """The names the modules under ``folder`` import from ``voxqueue.settings``."""
    names = set()
    for path in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "voxqueue.settings":
                names |= {alias.name for alias in node.names}
    return names


def test_the_edge_and_the_gateway_load_only_the_clients_settings() -> None:
    for folder in (ROOT / "edge", ROOT / "voxqueue" / "gateway"):
        assert folder.is_dir(), f"{folder} moved: check its new place instead"
        names = imported_names(folder)
        assert names <= {"ClientSettings", "get_client_settings"}, (folder, names)
    assert set(ClientSettings.model_fields) == {"redis", "turns", "gateway", "observability"}


def test_a_client_never_reads_the_workers_parts(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("VOXQUEUE_PROVIDER_MAX_ATTEMPTS", "not a number")
    clean_env.setenv("VOXQUEUE_GATEWAY_PORT", "9000")
    assert ClientSettings().gateway.port == 9000  # what the gateway and the edge load
    with pytest.raises(ValidationError):
        Settings()
