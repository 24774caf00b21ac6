"""The tools' settings (``settings.tools``): which tools are offered, their limits and
endpoints, and what the model may do with them (prompt injection: side effects need the
person)."""

from __future__ import annotations

from typing import Any

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class ToolSettings(BaseSettings):
    """What the tools worker (and the agent, which offers the tools) reads (``VOXQUEUE_*``)."""

    model_config = SettingsConfigDict(
        env_prefix="VOXQUEUE_", env_file=".env", extra="ignore", populate_by_name=True
    )

    # -- tools ------------------------------------------------------------------------------
    modules: str = Field(default="", validation_alias="VOXQUEUE_TOOL_MODULES")
    """Comma-separated modules whose tools workers load at start."""
    timeout_s: float = Field(default=10.0, validation_alias="VOXQUEUE_TOOL_TIMEOUT_S")
    result_max_chars: int = Field(default=4000,
                                  validation_alias="VOXQUEUE_TOOL_RESULT_MAX_CHARS")
    timezone: str = ""
    """IANA zone of the people using the assistant ("at 18:30", "what time is it");
    empty: the machine's local zone."""
    allow: str = Field(default="", validation_alias="VOXQUEUE_TOOLS_ALLOW")
    """Comma-separated tool names: when set, only these are offered."""
    deny: str = Field(default="", validation_alias="VOXQUEUE_TOOLS_DENY")
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

    @property
    def module_names(self) -> list[str]:
        """``modules``, split at its commas."""
        return [name.strip() for name in self.modules.split(",") if name.strip()]
