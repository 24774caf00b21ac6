"""docs/settings.md is the settings classes' own fields, rendered; it stays in step with them."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from voxqueue.cli_settings_doc import CLASSES, COMMAND, env_names, render

PAGE = Path(__file__).resolve().parents[2] / "docs" / "settings.md"


def test_docs_settings_md_is_in_step_with_the_settings() -> None:
    assert PAGE.read_text() == render(), (
        f"docs/settings.md is out of step with the settings classes: refresh it with `{COMMAND}`")


def test_every_field_of_every_settings_class_is_on_the_page() -> None:
    page = render()
    missing = [name for cls, _ in CLASSES for field_name, field in cls.model_fields.items()
               for name in env_names(cls, field_name, field) if f"`{name}`" not in page]
    assert missing == []
    assert ("| `VOXQUEUE_REDIS_URL` | `redis.url` | `str` | `redis://127.0.0.1:6379/0` | Broker,"
            in page)
    assert "| `VOXQUEUE_GATEWAY_PORT` | `gateway.port` | `int` | `8765` |" in page
    assert "| `OPENAI_API_KEY` or `VOXQUEUE_OPENAI_API_KEY` |" in page
    assert "`VOXQUEUE_EDGE_WAKE_WORDS`" in page and "`VOXQUEUE_WYOMING_TOOLS`" in page


class _Sample(BaseSettings):
    """A settings class with a secret default, a computed one, bounds and sections."""

    model_config = SettingsConfigDict(env_prefix="SAMPLE_")

    # -- first part ---------------------------------------------------------------------
    token: SecretStr = SecretStr("hunter2-secret")
    """The token."""
    count: int = Field(default=3, ge=1)
    # -- second part --------------------------------------------------------------------
    made: str = Field(default_factory=lambda: "made-here")
    described: str = Field(default="x", description="From Field | with a bar.")


def test_a_secret_default_is_never_printed_and_sections_come_from_the_comments() -> None:
    page = render(((_Sample, "Sample"),))
    assert "hunter2" not in page
    assert ("| `SAMPLE_TOKEN` | `token` | `SecretStr` | set (secret, not shown) | The token. |"
            in page)
    assert "| `SAMPLE_COUNT` | `count` | `int` (≥ 1) | `3` |  |" in page
    assert "| `SAMPLE_MADE` | `made` | `str` | `made-here` |  |" in page
    assert "| `SAMPLE_DESCRIBED` | `described` | `str` | `x` | From Field \\| with a bar. |" in page
    assert page.index("### First part") < page.index("SAMPLE_TOKEN") < page.index(
        "### Second part") < page.index("SAMPLE_MADE")
