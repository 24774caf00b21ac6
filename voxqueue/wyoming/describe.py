"""What the server says it is: the ``info`` answer to ``describe``."""

from __future__ import annotations

from collections.abc import Mapping

from wyoming.info import (
    AsrModel,
    AsrProgram,
    Attribution,
    HandleModel,
    HandleProgram,
    Info,
    TtsProgram,
    TtsVoice,
)

from voxqueue.settings import Settings

VOXQUEUE = Attribution(name="voxqueue", url="https://github.com/voxqueue/voxqueue")
#: Languages OpenAI's transcription and ElevenLabs' multilingual voices speak (a common subset).
CLOUD_LANGUAGES = ["en", "de", "es", "fr", "it", "nl", "pl", "pt", "sv", "ja", "zh"]
#: Who made each provider's model, for the attribution Home Assistant shows.
MADE_BY = {
    "whisper": Attribution(name="OpenAI Whisper (faster-whisper)",
                           url="https://github.com/SYSTRAN/faster-whisper"),
    "pocketsphinx": Attribution(name="CMU PocketSphinx",
                                url="https://github.com/cmusphinx/pocketsphinx"),
    "openai": Attribution(name="OpenAI", url="https://platform.openai.com"),
    "piper": Attribution(name="Piper", url="https://github.com/OHF-Voice/piper1-gpl"),
    "elevenlabs": Attribution(name="ElevenLabs", url="https://elevenlabs.io"),
    "local": VOXQUEUE,
}


def stt_languages(settings: Settings, provider: str) -> list[str]:
    if provider == "whisper":
        language = settings.providers.whisper_language
        return [language] if language else CLOUD_LANGUAGES
    if provider == "openai":
        return CLOUD_LANGUAGES
    return ["en"]


def describe(settings: Settings, in_service: Mapping[str, str] | None = None) -> Info:
    """Speech to text, text to speech and the agent: the providers the workers reported
    (``in_service``), else those the settings resolve to."""
    used = {**settings.providers.in_use(), **(in_service or {})}
    stt, llm, tts = used["stt"], used["llm"], used["tts"]
    stt_langs = stt_languages(settings, stt)
    tts_langs = CLOUD_LANGUAGES if tts == "elevenlabs" else ["en"]
    voice = settings.providers.tts_voice if tts == "elevenlabs" else "joe-us"
    agent = settings.providers.llm_model if llm == "openai" else "local intents"
    return Info(
        asr=[AsrProgram(
            name="voxqueue-stt", attribution=VOXQUEUE, installed=True, version=None,
            description=f"voxqueue's stt queue ({stt})",
            models=[AsrModel(name=stt, attribution=MADE_BY.get(stt, VOXQUEUE), installed=True,
                             description=f"speech to text: {stt}", version=None,
                             languages=stt_langs)])],
        tts=[TtsProgram(
            name="voxqueue-tts", attribution=VOXQUEUE, installed=True, version=None,
            description=f"voxqueue's tts queue ({tts})", supports_synthesize_streaming=True,
            voices=[TtsVoice(name=voice, attribution=MADE_BY.get(tts, VOXQUEUE),
                             installed=True, description=f"{tts} voice {voice}", version=None,
                             languages=tts_langs)])],
        handle=[HandleProgram(
            name="voxqueue-agent", attribution=VOXQUEUE, installed=True, version=None,
            description="voxqueue's agent: tools, history and monitors",
            models=[HandleModel(name=agent, attribution=MADE_BY.get(llm, VOXQUEUE),
                                installed=True, description=f"the agent loop ({agent})",
                                version=None, languages=stt_langs)])],
    )
