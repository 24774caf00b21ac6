"""Home Assistant's own ``wyoming`` integration against a real ``voxqueue wyoming``.

Home Assistant runs in its test harness (``pytest-homeassistant-custom-component``, one pinned
release per Home Assistant version, in ``.venv-ha``: ``./vq test --ha``); voxqueue runs in its
own processes in front of real Redis and real workers on the offline engines (conftest.py).
Each test goes through Home Assistant's code as a user's setup does: the integration added
with its config flow, its speech-to-text, text-to-speech and conversation entities, and an
Assist pipeline from audio.
"""

from __future__ import annotations

import io
import json
import re
import wave
from collections.abc import AsyncIterator
from importlib.metadata import version
from ipaddress import ip_address
from pathlib import Path

import homeassistant.components
import pytest
from conftest import SPEECH, Voxqueue
from homeassistant.components import assist_pipeline, conversation, stt, tts
from homeassistant.components.tts.helper import get_engine_instance
from homeassistant.config_entries import ConfigEntry, ConfigEntryState
from homeassistant.core import Context, HomeAssistant
from homeassistant.helpers import entity_registry as er
from homeassistant.helpers.service_info.zeroconf import ZeroconfServiceInfo
from homeassistant.setup import async_setup_component

#: Every test talks to voxqueue over TCP (Home Assistant's harness blocks sockets by default).
pytestmark = pytest.mark.usefixtures("socket_enabled")
WYOMING = tuple(int(p) for p in version("wyoming").split(".")[:2])
#: wyoming 1.7 sends the conversation id in the transcript's context (1.5 drops the context).
SENDS_CONVERSATION_ID = WYOMING >= (1, 7)
RATE, WIDTH = 16000, 2
#: Home Assistant's TTS converts to mp3 with ffmpeg unless asked for what the engine makes.
WAV = {"preferred_format": "wav"}


def pcm_of(name: str) -> bytes:
    with wave.open(str(SPEECH / name)) as wav:
        assert (wav.getframerate(), wav.getsampwidth(), wav.getnchannels()) == (RATE, WIDTH, 1)
        return wav.readframes(wav.getnframes())


async def chunks(pcm: bytes, size: int = 1024) -> AsyncIterator[bytes]:
    for at in range(0, len(pcm), size):
        yield pcm[at:at + size]


def words(text: str | None) -> str:
    return " ".join(re.findall(r"[a-z0-9']+", (text or "").lower()))


def speech_seconds(wav_bytes: bytes) -> float:
    """The length of a WAV's audio, whole or streamed (whose header says no frames: Home
    Assistant's streamed TTS writes it before the audio is known)."""
    with wave.open(io.BytesIO(wav_bytes)) as wav:
        assert (wav.getframerate(), wav.getsampwidth(), wav.getnchannels()) == (RATE, WIDTH, 1)
    data = wav_bytes.index(b"data") + 8  # the PCM after the data chunk's header, to the end
    return len(wav_bytes[data:]) / (RATE * WIDTH)


async def heard(stream: tts.ResultStream) -> bytes:
    return b"".join([chunk async for chunk in stream.async_stream_result()])


@pytest.fixture
async def entry(hass: HomeAssistant, voxqueue: Voxqueue, tmp_path) -> AsyncIterator[ConfigEntry]:
    """The integration added as a user adds it: *Add integration → Wyoming Protocol*, the
    host and port of ``voxqueue wyoming``."""
    hass.config.config_dir = str(tmp_path)  # TTS's cache, Assist's pipelines
    voxqueue.llm.reset()
    # What a running Home Assistant always has (the conversation agent needs it).
    assert await async_setup_component(hass, "homeassistant", {})
    flow = await hass.config_entries.flow.async_init("wyoming", context={"source": "user"})
    result = await hass.config_entries.flow.async_configure(
        flow["flow_id"], {"host": "127.0.0.1", "port": voxqueue.port})
    assert result["type"] == "create_entry", result
    await hass.async_block_till_done()
    made = result["result"]
    yield made
    await hass.config_entries.async_unload(made.entry_id)
    await hass.async_block_till_done()


def entity_of(hass: HomeAssistant, entry: ConfigEntry, domain: str) -> str:
    (found,) = [e.entity_id for e in er.async_entries_for_config_entry(er.async_get(hass),
                                                                       entry.entry_id)
                if e.domain == domain]
    return found


# -- the pins ---------------------------------------------------------------------------------
def test_the_pins_are_the_integrations_own():
    """``requirements-<version>.txt`` pins what the manifests of ``wyoming`` and of the
    integrations it depends on ask for (Home Assistant installs them at run time, its test
    harness does not), and they are what is installed."""
    pins = Path(__file__).with_name(f"requirements-{version('homeassistant')}.txt")
    pinned = {line.strip() for line in pins.read_text().splitlines()
              if line.strip() and not line.startswith("#")
              and not line.startswith("pytest-homeassistant-custom-component")}
    components = Path(homeassistant.components.__path__[0])
    asked: set[str] = set()
    todo, seen = ["wyoming"], set()
    while todo:
        if (domain := todo.pop()) in seen:
            continue
        seen.add(domain)
        manifest = json.loads((components / domain / "manifest.json").read_text())
        asked.update(manifest.get("requirements", []))
        todo += manifest.get("dependencies", [])
    assert pinned == asked
    for requirement in asked:
        name, wanted = requirement.split("==")
        assert version(name) == wanted, requirement


# -- the config entry ---------------------------------------------------------------------------
async def test_the_integration_loads_with_stt_tts_and_the_agent(hass, entry, voxqueue):
    assert entry.state is ConfigEntryState.LOADED
    service = hass.data["wyoming"][entry.entry_id].service
    info = service.info
    assert [a.name for a in info.asr] == ["voxqueue-stt"]
    assert [m.name for m in info.asr[0].models] == [voxqueue.stt]
    assert [t.name for t in info.tts] == ["voxqueue-tts"]
    assert [v.name for v in info.tts[0].voices] == ["joe-us"]
    assert [h.name for h in info.handle] == ["voxqueue-agent"] and info.intent == []
    assert entry.title == "voxqueue-stt"  # the first service, as Home Assistant names it
    assert sorted(p.value for p in service.platforms) == ["conversation", "stt", "tts"]
    for domain in ("stt", "tts", "conversation"):
        assert hass.states.get(entity_of(hass, entry, domain)) is not None, domain
    speech = stt.async_get_speech_to_text_entity(hass, entity_of(hass, entry, "stt"))
    assert speech is not None and "en" in speech.supported_languages
    voice = get_engine_instance(hass, entity_of(hass, entry, "tts"))
    assert voice is not None and voice.supported_languages == ["en"]
    if hasattr(voice, "async_supports_streaming_input"):  # Home Assistant 2025.7 and later
        assert voice.async_supports_streaming_input() is (WYOMING >= (1, 7))


async def test_discovered_by_zeroconf_it_is_added_once_confirmed(hass, voxqueue, tmp_path):
    """``voxqueue wyoming --zeroconf NAME`` advertises ``_wyoming._tcp`` (checked in the main
    suite); Home Assistant, told of it, asks voxqueue what it is and offers to add it."""
    hass.config.config_dir = str(tmp_path)
    assert await async_setup_component(hass, "homeassistant", {})
    found = ZeroconfServiceInfo(
        ip_address=ip_address("127.0.0.1"), ip_addresses=[ip_address("127.0.0.1")],
        port=voxqueue.port, hostname="voxqueue.local.", type="_wyoming._tcp.local.",
        name="kitchen._wyoming._tcp.local.", properties={})
    flow = await hass.config_entries.flow.async_init("wyoming", context={"source": "zeroconf"},
                                                     data=found)
    assert flow["type"] == "form" and flow["step_id"] == "zeroconf_confirm", flow
    assert flow["description_placeholders"] == {"name": "voxqueue-stt"}
    result = await hass.config_entries.flow.async_configure(flow["flow_id"], {})
    assert result["type"] == "create_entry", result
    assert result["data"] == {"host": "127.0.0.1", "port": voxqueue.port}
    await hass.async_block_till_done()
    assert result["result"].state is ConfigEntryState.LOADED
    await hass.config_entries.async_unload(result["result"].entry_id)
    await hass.async_block_till_done()


# -- speech to text -----------------------------------------------------------------------------
def metadata() -> stt.SpeechMetadata:
    return stt.SpeechMetadata(language="en", format=stt.AudioFormats.WAV,
                              codec=stt.AudioCodecs.PCM, bit_rate=stt.AudioBitRates.BITRATE_16,
                              sample_rate=stt.AudioSampleRates.SAMPLERATE_16000,
                              channel=stt.AudioChannels.CHANNEL_MONO)


async def test_a_recording_is_transcribed(hass, entry):
    speech = stt.async_get_speech_to_text_entity(hass, entity_of(hass, entry, "stt"))
    result = await speech.async_process_audio_stream(metadata(),
                                                     chunks(pcm_of("command_time.wav")))
    assert result.result is stt.SpeechResultState.SUCCESS
    assert words(result.text) == "what time is it"


async def test_silence_is_no_text_recognized_not_an_error(hass, entry):
    speech = stt.async_get_speech_to_text_entity(hass, entity_of(hass, entry, "stt"))
    result = await speech.async_process_audio_stream(metadata(), chunks(bytes(2 * RATE * WIDTH)))
    assert result.result is stt.SpeechResultState.SUCCESS and result.text == ""
    # In a pipeline, Home Assistant says so ("no text recognized"), not that the STT failed.
    events = await run_pipeline(hass, entry, bytes(2 * RATE * WIDTH))
    errors = [e.data for e in events if e.type == "error"]
    assert [e["code"] for e in errors] == ["stt-no-text-recognized"], errors


# -- text to speech -----------------------------------------------------------------------------
async def test_a_sentence_is_spoken(hass, entry):
    """Every sentence is heard: voxqueue synthesizes them apart, and relays them as one
    audio (Home Assistant with wyoming 1.5 stops reading at the first ``audio-stop``)."""
    engine = entity_of(hass, entry, "tts")
    one = tts.async_create_stream(hass, engine, "en", WAV)
    one.async_set_message("The kitchen lights are on.")
    two = tts.async_create_stream(hass, engine, "en", WAV)
    two.async_set_message("The kitchen lights are on. The front door is locked.")
    one_s, two_s = speech_seconds(await heard(one)), speech_seconds(await heard(two))
    assert 1.0 < one_s < 5.0
    assert 1.5 * one_s < two_s < 3 * one_s, (one_s, two_s)


@pytest.mark.skipif(WYOMING < (1, 7), reason="Home Assistant with wyoming 1.5 streams no text "
                                              "to its TTS (synthesize-start: wyoming 1.7)")
async def test_a_streamed_reply_is_spoken_once(hass, entry):
    """Home Assistant streams the text as its LLM writes it (``synthesize-start``, chunks, the
    whole text again for older servers, ``synthesize-stop``): spoken once, as long as the
    same text sent whole."""
    engine = entity_of(hass, entry, "tts")
    text = ["The kitchen ", "lights are ", "on. The door ", "is locked."]

    async def written() -> AsyncIterator[str]:
        for part in text:
            yield part

    streamed = tts.async_create_stream(hass, engine, "en", WAV)
    streamed.async_set_message_stream(written())
    whole = tts.async_create_stream(hass, engine, "en", {**WAV, "voice": "joe-us"})
    whole.async_set_message("".join(text))
    streamed_s, whole_s = speech_seconds(await heard(streamed)), speech_seconds(await heard(whole))
    assert 2.0 < streamed_s < 8.0
    assert abs(streamed_s - whole_s) < 0.25 * whole_s, (streamed_s, whole_s)


# -- conversation -------------------------------------------------------------------------------
async def converse(hass, agent: str, text: str, conversation_id: str | None):
    result = await conversation.async_converse(hass, text, conversation_id, Context(),
                                               language="en", agent_id=agent)
    assert result.response.response_type.value == "action_done", result.response.as_dict()
    return result


def user_texts(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "user"]


async def test_a_conversation_keeps_its_context_across_turns(hass, entry, voxqueue):
    """The second turn of a conversation reaches the LLM with the first (wyoming 1.7 sends
    Home Assistant's conversation id; with 1.5 every turn is a conversation of its own)."""
    agent = entity_of(hass, entry, "conversation")
    voxqueue.llm.script_chat({"match": "favourite colour is", "content": "Noted: green."},
                             {"match": "what is my", "content": "Your favourite colour is green."})
    first = await converse(hass, agent, "My favourite colour is green.", None)
    assert first.response.speech["plain"]["speech"] == "Noted: green."
    second = await converse(hass, agent, "What is my favourite colour?", first.conversation_id)
    assert second.response.speech["plain"]["speech"] == "Your favourite colour is green."
    *_, asked = voxqueue.llm.chat_requests()
    if SENDS_CONVERSATION_ID:
        assert second.conversation_id == first.conversation_id
        assert user_texts(asked) == ["My favourite colour is green.",
                                     "What is my favourite colour?"]
        # Another conversation starts with nothing of it.
        await converse(hass, agent, "What is my favourite colour?", None)
        *_, other = voxqueue.llm.chat_requests()
        assert user_texts(other) == ["What is my favourite colour?"]
    else:
        assert user_texts(asked) == ["What is my favourite colour?"]


async def test_a_command_is_answered_by_the_local_intents(hass, entry, voxqueue):
    result = await converse(hass, entity_of(hass, entry, "conversation"),
                            "What is twelve times thirteen?", None)
    assert "156" in result.response.speech["plain"]["speech"]
    assert voxqueue.llm.chat_requests() == []  # voxqueue's local intents first, no LLM


async def test_an_agent_that_fails_is_reported_not_waited_for(hass, entry, voxqueue):
    """The LLM answers 500 to every try: voxqueue sends ``not-handled`` with a sentence for the
    person (the status stays in voxqueue's events), and Home Assistant says the agent failed to
    handle it."""
    voxqueue.llm.fail_chat(times=20)
    result = await conversation.async_converse(hass, "Tell me a story about dragons.", None,
                                               Context(), language="en",
                                               agent_id=entity_of(hass, entry, "conversation"))
    response = result.response
    assert response.response_type.value == "error", response.as_dict()
    assert response.error_code.value == "failed_to_handle", response.as_dict()
    said = response.speech["plain"]["speech"]
    assert said == "Sorry, something went wrong and I can't answer that right now.", said
    assert len(voxqueue.llm.chat_requests()) >= 1


# -- the whole Assist pipeline ------------------------------------------------------------------
async def run_pipeline(hass: HomeAssistant, entry: ConfigEntry,
                       pcm: bytes) -> list[assist_pipeline.PipelineEvent]:
    """Audio in, through a pipeline whose STT, agent and TTS are voxqueue's."""
    pipeline = assist_pipeline.async_get_pipeline(hass)
    await assist_pipeline.async_update_pipeline(
        hass, pipeline, language="en", stt_engine=entity_of(hass, entry, "stt"),
        stt_language="en", conversation_engine=entity_of(hass, entry, "conversation"),
        conversation_language="en", tts_engine=entity_of(hass, entry, "tts"),
        tts_language="en", tts_voice=None)
    events: list[assist_pipeline.PipelineEvent] = []
    await assist_pipeline.async_pipeline_from_audio_stream(
        hass, context=Context(), event_callback=events.append, stt_metadata=metadata(),
        stt_stream=chunks(pcm), pipeline_id=pipeline.id, tts_audio_output=WAV)
    return events


async def test_the_assist_pipeline_from_audio_to_spoken_answer(hass, entry, voxqueue):
    pcm = pcm_of("command_time.wav") + bytes(RATE * WIDTH)  # and a second of silence
    events = await run_pipeline(hass, entry, pcm)
    kinds = [e.type.value for e in events]
    assert "error" not in kinds, [e.data for e in events if e.type == "error"]
    assert kinds[0] == "run-start" and kinds[-1] == "run-end"
    for stage in ("stt-start", "stt-end", "intent-start", "intent-end", "tts-start", "tts-end"):
        assert stage in kinds, kinds
    (stt_end,) = [e.data for e in events if e.type == "stt-end"]
    assert words(stt_end["stt_output"]["text"]) == "what time is it"
    (intent_end,) = [e.data for e in events if e.type == "intent-end"]
    reply = intent_end["intent_output"]["response"]["speech"]["plain"]["speech"]
    assert reply.startswith("It's"), reply  # the local intents' answer: the time of day
    (tts_end,) = [e.data for e in events if e.type == "tts-end"]
    stream = tts.async_get_stream(hass, tts_end["tts_output"]["token"])
    assert stream is not None
    assert 0.5 < speech_seconds(await heard(stream)) < len(reply) / 5 + 2
    assert voxqueue.llm.chat_requests() == []
