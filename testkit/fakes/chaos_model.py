"""Fake providers that can surprise, for the chaos test: the same HTTP boundary as
:class:`testkit.fakes.provider_server.FakeProviders`, with a model that behaves like a sampled one.

- Every answer is worded afresh: the wording is drawn from a generator seeded by the run's seed,
  the request's messages and how many times that same request was asked before, so a model
  asked again (a step redelivered after a kill) answers with other words, and may choose tools
  where it answered before, or the other way round.
- An answer is several sentences, streamed word by word (paced by the latency profile).
- Asked a fresh question, it sometimes calls 1-3 tools in parallel, the first always the side
  effect ``inscribe`` (tests/tool_modules/chaos_tools.py), the others ``inscribe`` or ``lookup``.
- After tools, its reply QUOTES every tool message it was given, so what the model was told
  (true or not) is in the reply and in what is heard.
- The voice encodes the text it is given into the audio (:func:`voice_pcm`), so the test can
  decode what was heard back into words (:func:`heard_text`).
- Speech carries its own transcript (:func:`speech_with_transcript`): the recognizer decodes it,
  so every audio turn has a text of its own.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import struct
from collections import Counter
from typing import Any

from aiohttp import web

from testkit.fakes.provider_server import FILE_KEY, FakeProviders, Json, _text_of

#: Samples per character of the fake voice (2 ms at 16 kHz: a sentence streams over ~100 ms).
SAMPLES_PER_CHAR = 32
#: What precedes a transcript embedded in speech (an even length: whole samples).
TRANSCRIPT_MARK = b"\x00CHAOS-TRANSCRIPT\x00\x00"

SIDE_EFFECT_TOOL = "inscribe"
OPENERS = ("Alright", "Sure thing", "Of course", "Right away", "Here goes", "Okay then",
           "Certainly", "Happy to help", "Let me see", "Good question")
SUBJECTS = ("the garden", "the kitchen lights", "the morning walk", "the old piano",
            "the weekly plan", "the blue kettle", "the front door", "the reading list",
            "the spare room", "the bike ride", "the tea shelf", "the window box")
VERBS = ("looks", "seems", "sounds", "appears", "turns out", "feels")
STATES = ("fine today", "ready for later", "quiet for now", "in good order", "as you left it",
          "better than yesterday", "just about done", "worth a second look", "all set")
CLOSERS = ("That is all for now.", "Anything else?", "Let me know if you need more.",
           "Hope that helps.", "Talk soon.", "I am here if you need me.")
INTROS = ("Here is what the tools told me.", "The tools have answered.",
          "I asked the tools and got this.", "Done asking around.", "This came back.")
ORDINALS = ("first", "second", "third", "fourth", "fifth")


def voice_pcm(text: str) -> bytes:
    """The fake voice's audio for ``text``: each character as SAMPLES_PER_CHAR equal samples."""
    return b"".join(struct.pack("<H", ord(c) & 0xFFFF) * SAMPLES_PER_CHAR for c in text)


def heard_text(pcm: bytes) -> str:
    """The text the fake voice spoke in ``pcm`` (a concatenation of :func:`voice_pcm`); a
    broken character (audio cut or spliced off a character's boundary) reads as U+FFFD."""
    n = len(pcm) // 2
    samples = struct.unpack(f"<{n}H", pcm[: n * 2])
    out = []
    for i in range(0, n, SAMPLES_PER_CHAR):
        group = samples[i : i + SAMPLES_PER_CHAR]
        whole = len(group) == SAMPLES_PER_CHAR and len(set(group)) == 1
        out.append(chr(group[0]) if whole else "\ufffd")
    return "".join(out) + ("\ufffd" if len(pcm) % 2 else "")


def speech_with_transcript(pcm: bytes, text: str) -> bytes:
    """16-bit PCM speech followed by ``text`` for the fake recognizer to read back."""
    data = text.encode()
    tail = TRANSCRIPT_MARK + struct.pack("<H", len(data)) + data
    return pcm + tail + b"\x00" * (len(tail) % 2)


def transcript_in(audio: bytes) -> str | None:
    """The transcript :func:`speech_with_transcript` put in ``audio`` (a WAV file), if any."""
    at = audio.rfind(TRANSCRIPT_MARK)
    if at < 0:
        return None
    start = at + len(TRANSCRIPT_MARK)
    (size,) = struct.unpack("<H", audio[start : start + 2])
    return audio[start + 2 : start + 2 + size].decode()


class ChaosProviders(FakeProviders):
    """FakeProviders whose model, voice and recognizer behave as the module says."""

    def __init__(self, seed: int, *, tool_share: float = 0.5, **kw: Any) -> None:
        self.seed = seed
        self.tool_share = tool_share
        self._asked: Counter[str] = Counter()
        super().__init__(**kw)

    # -- the model -----------------------------------------------------------------------
    def _pick_chat(self, messages: list[Json]) -> Json:
        digest = hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()
        with self._lock:
            self._asked[digest] += 1
            asked = self._asked[digest]
        rng = random.Random(f"{self.seed}:{digest}:{asked}")
        last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"),
                        default=-1)
        results = [m for m in messages[last_user + 1 :] if m.get("role") == "tool"]
        if messages and messages[-1].get("role") == "tool":
            return {"content": quoting_reply(rng, results)}
        if not results and rng.random() < self.tool_share:
            return {"tool_calls": tool_calls(rng, _text_of(messages[last_user].get("content")))}
        return {"content": fresh_reply(rng)}

    # -- the voice and the recognizer ------------------------------------------------------
    async def _tts(self, request: web.Request, record: Json) -> web.StreamResponse:
        prof = self.profile
        pcm = voice_pcm(str(record["json"]["text"]))
        step = 3200  # 100 ms of 16 kHz audio at a time
        chunks = [pcm[i : i + step] for i in range(0, len(pcm), step)]
        resp = web.StreamResponse(headers={"Content-Type": "audio/pcm"})
        resp.enable_chunked_encoding()
        await asyncio.sleep(prof["tts_ttfb_s"])
        await resp.prepare(request)
        gaps = [0.0] + [len(c) / 32000 * prof["tts_rtf"] for c in chunks[:-1]]
        await self._paced_write(request, resp, chunks, gaps,
                                record.get("fault", {}).get("cut_after_chunks"))
        await resp.write_eof()
        return resp

    def _pick_transcript(self, sha256: str) -> str:
        raise AssertionError("unused: _stt reads the transcript from the audio")

    async def _stt(self, request: web.Request, record: Json) -> web.Response:
        text = transcript_in(request[FILE_KEY]) or self.default_transcript
        await asyncio.sleep(self.profile["stt_delay_s"])
        return web.json_response({"text": text, "usage": {"type": "duration", "seconds": 1}})


def fresh_reply(rng: random.Random) -> str:
    """Three to five sentences, worded at random."""
    sentences = [f"{rng.choice(OPENERS)}, {rng.choice(SUBJECTS)} {rng.choice(VERBS)} "
                 f"{rng.choice(STATES)}." for _ in range(rng.randint(2, 4))]
    return " ".join([*sentences, rng.choice(CLOSERS)])


def tool_calls(rng: random.Random, question: str) -> list[Json]:
    """One to three calls in parallel, the first always the side effect."""
    calls = []
    for i in range(rng.randint(1, 3)):
        call_id = f"call_{rng.getrandbits(96):024x}"
        if i == 0 or rng.random() < 0.5:
            note = f"{question[:60]} / {rng.choice(SUBJECTS)}"
            calls.append({"id": call_id, "name": SIDE_EFFECT_TOOL, "arguments": {"note": note}})
        else:
            calls.append({"id": call_id, "name": "lookup",
                          "arguments": {"topic": rng.choice(SUBJECTS)}})
    return calls


def quoting_reply(rng: random.Random, results: list[Json]) -> str:
    """A reply that quotes every tool message verbatim, one sentence each, worded at random."""
    parts = [rng.choice(INTROS)]
    for i, message in enumerate(results):
        content = " ".join(_text_of(message.get("content")).split())
        end = "" if content.endswith((".", "!", "?")) else "."
        parts.append(f"The {ORDINALS[i % len(ORDINALS)]} tool said: {content}{end}")
    parts.append(rng.choice(CLOSERS))
    return " ".join(parts)
