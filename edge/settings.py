"""The edge device's settings: environment variables with the prefix ``VOXQUEUE_EDGE_``.

The server comes from voxqueue's own settings: the gateway with the device's token
(``VOXQUEUE_GATEWAY_URL``, ``VOXQUEUE_DEVICE_TOKEN``), or a Redis on this machine; a device never
holds the password of a Redis elsewhere unless its host is declared trusted
(:func:`direct_redis_problem`).
"""

from __future__ import annotations

import contextlib
import ipaddress
import re
import socket
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

#: Trailing silence that ends a command, as Home Assistant names them.
SILENCE_PRESETS: dict[str, float] = {"relaxed": 1.25, "default": 0.7, "aggressive": 0.25}
WAKE_WORDS: tuple[str, ...] = ("okay_nabu", "hey_jarvis", "hey_mycroft", "alexa")


def default_device() -> str:
    """The host's name, reduced to the characters a device id may hold."""
    name = re.sub(r"[^A-Za-z0-9_.:-]+", "-", socket.gethostname()).strip("-.")
    return name[:128] or "edge"


def silence_seconds(value: str | float) -> float:
    """Seconds of silence for a preset name or a number of seconds."""
    if isinstance(value, str) and value.strip().lower() in SILENCE_PRESETS:
        return SILENCE_PRESETS[value.strip().lower()]
    try:
        seconds = float(value)
    except ValueError:
        raise ValueError(
            f"silence must be {', '.join(SILENCE_PRESETS)} or seconds, not {value!r}"
        ) from None
    if not 0.05 <= seconds <= 10:
        raise ValueError(f"silence must be between 0.05 and 10 seconds, not {seconds}")
    return seconds


class EdgeSettings(BaseSettings):
    """What the device does: its name, wake words, and how it listens and answers."""

    model_config = SettingsConfigDict(env_prefix="VOXQUEUE_EDGE_", env_file=".env", extra="ignore")

    device: str = Field(default_factory=default_device, pattern=r"^[A-Za-z0-9_.:-]{1,128}$")
    """The device id: announcements for it arrive on its own stream."""
    session: str = Field(default="", pattern=r"^[A-Za-z0-9_.:-]{0,128}$")
    """A fixed session (conversation history); empty: a new one after ``session_idle_s``."""
    session_idle_s: float = Field(default=300.0, gt=0)
    wake_words: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: ["okay_nabu", "hey_jarvis"]
    )
    """Built-in models of pymicro-wakeword (comma-separated in the environment)."""
    wake_engine: Literal["micro", "openwakeword"] = "micro"
    """pymicro-wakeword (the lightest), or openWakeWord (``pip install pyopen-wakeword``)."""
    wake_cutoff: float | None = Field(default=None, gt=0, lt=1)
    """Detection threshold for every model; None: each model's own."""
    cooldown_s: float = Field(default=2.0, ge=0)
    """A second detection within this many seconds is ignored (one utterance wakes once)."""
    preroll_s: float = Field(default=0.2, ge=0, le=2)
    """Audio kept from just before the detection, so nobody needs to pause after the wake word."""
    vad: Literal["webrtc", "micro"] = "webrtc"
    vad_aggressiveness: int = Field(default=2, ge=0, le=3)
    """webrtcvad's mode: 0 (lenient) to 3 (strict)."""
    vad_threshold: float = Field(default=0.5, gt=0, lt=1)
    """pymicro-vad's speech probability threshold."""
    silence: str = "default"
    """Trailing silence that ends a command: relaxed, default, aggressive, or seconds."""
    speech_start_s: float = Field(default=0.3, gt=0)
    """Speech needed before a command counts as started."""
    max_seconds: float = Field(default=15.0, gt=0, le=60)
    """Hard cap on one command."""
    no_speech_s: float = Field(default=4.0, gt=0)
    """After the wake word, give up when no speech has started by then (nothing is sent)."""
    follow_up_s: float = Field(default=4.0, ge=0)
    """After a reply that asks a question, listen this long without the wake word (0: never)."""
    stream: bool = True
    """Send the command while it is spoken (speech to text runs meanwhile); off: send it whole
    once it has ended."""
    end_early_s: float = Field(default=0.25, ge=0)
    """While streaming: end the command after this much silence once the server has
    understood it as a complete command (instead of the full trailing silence; 0: never)."""
    unfinished_wait_s: float = Field(default=1.2, ge=0)
    """While streaming: the silence that ends a command whose words so far stop mid-sentence
    ("set a timer for"), when longer than the usual trailing silence (0: never wait longer)."""
    deadline_s: float = Field(default=30.0, gt=0)
    """A turn's deadline; past it (and a grace period) the device apologizes."""
    earcons: bool = True
    """Short local sounds for errors and lost connections."""
    input_device: str | None = None
    """sounddevice input device (name or index); None: the system default."""
    output_device: str | None = None
    direct_redis: bool = False
    """This host is trusted with the Redis password (a server running its own edge): reach a
    Redis that is not on this machine without the gateway (``--trusted-host``)."""

    @field_validator("wake_words", mode="before")
    @classmethod
    def _split_words(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = [w.strip() for w in value.split(",") if w.strip()]
        return value

    @field_validator("wake_words")
    @classmethod
    def _known_words(cls, value: list[str]) -> list[str]:
        words = [w.strip().lower().replace(" ", "_").replace("-", "_") for w in value]
        if not words:
            raise ValueError("at least one wake word is needed")
        unknown = [w for w in words if w not in WAKE_WORDS]
        if unknown:
            raise ValueError(f"unknown wake word(s) {unknown}: choose from {', '.join(WAKE_WORDS)}")
        return list(dict.fromkeys(words))

    @field_validator("silence")
    @classmethod
    def _silence(cls, value: str) -> str:
        silence_seconds(value)
        return value

    @property
    def trailing_silence_s(self) -> float:
        return silence_seconds(self.silence)


def direct_redis_problem(redis_url: str, gateway_url: str | None, trusted: bool) -> str | None:
    """Why a device may not use these settings: it would hold the Redis password (the master
    credential) of a server elsewhere. None with a gateway, a Redis on this machine, or a host
    declared trusted."""
    if gateway_url or trusted:
        return None
    parts = urlsplit(redis_url)
    host = parts.hostname
    if parts.scheme == "unix" or host is None or host == "localhost":
        return None
    with contextlib.suppress(ValueError):
        if ipaddress.ip_address(host).is_loopback:
            return None
    return (f"refusing to reach Redis at {host} from a device: its URL is the server's master "
            "credential (everything in Redis, every device's turns). A device goes through "
            "the gateway with its own token: on the server run `voxqueue devices add NAME`, "
            "then set VOXQUEUE_GATEWAY_URL=https://SERVER:8765 and VOXQUEUE_DEVICE_TOKEN=<the "
            "token> here (and unset VOXQUEUE_REDIS_URL). If this host is trusted with the "
            "Redis password, pass --trusted-host or set VOXQUEUE_EDGE_DIRECT_REDIS=1.")
