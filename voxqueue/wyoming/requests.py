"""The three requests a Wyoming client makes, each answered through the queues: speech to text
(``transcribe``), a conversation turn (``transcript`` sent to the agent) and text to speech
(``synthesize``, see :mod:`voxqueue.wyoming.speech_out`)."""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from typing import Any

from wyoming.asr import Transcript
from wyoming.event import Event
from wyoming.handle import Handled, NotHandled

from voxqueue.client.direct import Client, SpeechStream, Turn
from voxqueue.contracts import ErrorCode, TurnResult
from voxqueue.spoken.apologies import apology_for
from voxqueue.wyoming.guard import WyomingPolicy

log = logging.getLogger("voxqueue.wyoming")

#: What a conversation id may hold once it names a voxqueue session.
_UNSAFE = re.compile(r"[^A-Za-z0-9_.:-]")


class RequestFailed(Exception):
    """The queues could not answer; ``code`` is the Wyoming error code sent back."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class LiveTurns:
    """The turns one connection started that may still be running, so a client that leaves
    leaves nothing behind."""

    def __init__(self) -> None:
        self.turns: list[Turn] = []
        self.streams: list[SpeechStream] = []

    def add(self, turn: Turn) -> Turn:
        self.turns = [t for t in self.turns if not t.done] + [turn]
        return turn

    def add_stream(self, stream: SpeechStream) -> SpeechStream:
        """A turn still being spoken: its stream is aborted if the client leaves."""
        self.streams = [s for s in self.streams if not s.writer.closed] + [stream]
        self.add(stream.turn)
        return stream

    def cancel_all(self, reason: str) -> None:
        for stream in self.streams:
            stream.abort(reason)
        for turn in self.turns:
            turn.cancel(reason)
        self.turns, self.streams = [], []


async def transcript_of(turn: Turn, language: str | None) -> Event:
    """The ``transcript`` that ends a speech-to-text turn."""
    result = await asyncio.to_thread(turn.wait)
    if result.status == "error" and (result.error or {}).get("code") == ErrorCode.STT_NO_TEXT:
        # Silence or noise: an empty transcript, as Wyoming's reference servers send, so Home
        # Assistant says "no text recognized" (an error reads as "speech-to-text failed").
        return Transcript(text="", language=language).event()
    if result.status != "ok":
        raise _failed(result, "stt-failed")
    return Transcript(text=result.transcript or "", language=language).event()


def session_of(context: dict[str, Any] | None) -> tuple[str, str]:
    """The conversation id Home Assistant sent (or a new one) and the voxqueue session it
    names: ``wyoming:<id>``, kept to safe characters and a sane length."""
    cid = str((context or {}).get("conversation_id") or uuid.uuid4().hex)
    return cid, "wyoming:" + _UNSAFE.sub("_", cid)[:100]


async def converse(client: Client, live: LiveTurns, text: str,
                   context: dict[str, Any] | None, policy: WyomingPolicy) -> Event:
    """A text turn in the conversation's session, run as the policy's device with its tools;
    ``handled`` with the reply, or ``not-handled`` with the reason when the agent could not
    answer."""
    cid, session = session_of(context)
    answer_context = {**(context or {}), "conversation_id": cid}
    if not text.strip():
        return NotHandled(text="Nothing was said.", context=answer_context).event()
    turn = live.add(await asyncio.to_thread(
        client.ask, text, session=session, speak=False, device=policy.device,
        effects_allowed=policy.effects_allowed))
    result = await asyncio.to_thread(turn.wait)
    if result.status != "ok" or result.reply is None:
        # Home Assistant says this text to the person: a sentence for them, not the error's
        # message (a provider's status, an exception), which the turn's events and log keep.
        error = result.error or {}
        log.warning("wyoming: turn %s not handled: %s", turn.turn_id,
                    error.get("message") or result.status)
        code = error.get("code") or (result.status if result.status != "ok" else None)
        return NotHandled(text=apology_for(code), context=answer_context).event()
    return Handled(text=result.reply, context=answer_context).event()


def _failed(result: TurnResult, code: str) -> RequestFailed:
    error = result.error or {}
    return RequestFailed(error.get("code") or code,
                         error.get("message") or f"the turn ended {result.status}")
