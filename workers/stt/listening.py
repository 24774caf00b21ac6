"""Speech read from its stream while it is spoken (``voxqueue.client.direct``).

The STT job starts with the speech. As the audio arrives, pauses are found (webrtcvad, 20 ms
frames); at each pause an offline engine decodes the words so far and the turn gets an
``stt-partial`` event (its text, and whether the local intents find a complete command in it).
When the command ends with no speech after the last pause, that decode is the transcript: it
was ready before the speaker's silence ran out. The pause before a whole decode
(``VOXQUEUE_STT_DECODE_PAUSE_S``) is set apart from an engine's that hears the speech as it
arrives (``VOXQUEUE_SPEECH_PAUSE_S``); both are 0.2 s by default. Cloud
engines, billed per request, decode once at the end unless
``VOXQUEUE_STT_DECODE_AT_PAUSES=on``. An engine that recognizes speech as it
arrives (pocketsphinx, ``LiveTranscriber``) is fed every piece instead: at a pause its words so
far cost nothing, and at the end only its final pass is left.

Each partial also says whether its words are a complete command (the edge may end the capture
after a short silence) or plainly unfinished ("set a timer for": the edge waits longer).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from voxqueue.audio import SAMPLE_RATE
from voxqueue.client import direct
from voxqueue.contracts import ErrorCode
from voxqueue.settings import ProviderSettings
from workers.runtime.stage import Stage
from workers.stt.providers.base import Hearing, LiveTranscriber, Transcriber, Transcript

#: webrtcvad's frame: 20 ms of 16 kHz int16.
FRAME_BYTES = SAMPLE_RATE * 2 // 50
#: How long a wait for the next piece is (the loop checks for cancellation in between).
BLOCK_MS = 250


class SpeechStopped(Exception):
    """The stream ended without its end: aborted by the writer, or silent past the limit."""

    def __init__(self, message: str, *, aborted: bool,
                 code: ErrorCode = ErrorCode.AUDIO_STREAM_STOPPED) -> None:
        super().__init__(message)
        self.aborted = aborted
        self.code = code


@dataclass
class Heard:
    """A complete command, and the transcript already decoded when it still holds."""

    pcm: bytes
    ready: Transcript | None
    ended_at: float | None
    at_pause: bool = False
    """Whether ``ready`` was decoded at the speaker's last pause, before the command ended."""
    live: bool = False
    """Whether the engine heard the command as it arrived (``LiveTranscriber``)."""


class Pauses:
    """Finds where the speaker pauses: ``pause_s`` of non-speech after speech (once there has
    been ``speech_s`` of it: a click is not a command)."""

    def __init__(self, pause_s: float, speech_s: float = 0.3) -> None:
        import webrtcvad

        self.vad = webrtcvad.Vad(2)
        self.pause_frames = max(1, round(pause_s / 0.02))
        self.speech_frames = max(1, round(speech_s / 0.02))
        self.spoken_until = 0  # bytes: the end of the last voiced frame
        self._voiced = 0
        self._offset = 0
        self._silent = 0
        self._rest = b""

    def feed(self, pcm: bytes) -> list[int]:
        """Feed audio; the byte offsets (ends of speech) where a pause was reached."""
        data = self._rest + pcm
        whole = len(data) - len(data) % FRAME_BYTES
        found = []
        for at in range(0, whole, FRAME_BYTES):
            self._offset += FRAME_BYTES
            if self.vad.is_speech(data[at:at + FRAME_BYTES], SAMPLE_RATE):
                self.spoken_until = self._offset
                self._voiced += 1
                self._silent = 0
            elif self.spoken_until:
                self._silent += 1
                if self._silent == self.pause_frames and self._voiced >= self.speech_frames:
                    found.append(self.spoken_until)
        self._rest = data[whole:]
        return found


def pause_s(providers: ProviderSettings, *, live: bool) -> float:
    """The silence that is a pause: ``stt_decode_pause_s`` before a whole decode,
    ``speech_pause_s`` for an engine that hears the speech as it arrives (``live``)."""
    return providers.speech_pause_s if live else providers.stt_decode_pause_s


def listen(stage: Stage, transcriber: Transcriber, *, live: bool, decode_at_pauses: bool,
           complete: Callable[[str], bool], unfinished: Callable[[str], bool]) -> Heard:
    """Read the turn's audio to its end, recognizing it meanwhile when asked: ``live``, an
    engine that hears as the audio arrives (``LiveTranscriber``) is fed every piece; otherwise, with
    ``decode_at_pauses``, the audio so far is decoded whole at each pause."""
    hearing = transcriber.hear(deadline=stage.spec.deadline) \
        if live and isinstance(transcriber, LiveTranscriber) else None
    try:
        return _listen(stage, transcriber, hearing, hearing is not None or decode_at_pauses,
                       complete, unfinished)
    finally:
        if hearing is not None:
            hearing.close()


def _listen(stage: Stage, transcriber: Transcriber, hearing: Hearing | None,
            decode_at_pauses: bool, complete: Callable[[str], bool],
            unfinished: Callable[[str], bool]) -> Heard:
    rt, spec = stage.rt, stage.spec
    assert spec.audio_key is not None
    settings = rt.settings
    pauses = Pauses(pause_s(settings.providers, live=hearing is not None)) \
        if decode_at_pauses else None
    pcm = bytearray()
    held = bytearray()  # audio not yet given to ``hearing``
    ready: tuple[int, Transcript] | None = None
    said = (-1, "")  # the last partial: its pause (bytes) and its words
    after, heard_at = "0", time.monotonic()
    while True:
        if stage.should_stop():
            raise SpeechStopped("the turn ended while it was spoken", aborted=True)
        pieces = direct.read(rt.redis, spec.audio_key, after, BLOCK_MS)
        if not pieces and time.monotonic() - heard_at > settings.providers.speech_idle_s:
            raise SpeechStopped(f"no audio for {settings.providers.speech_idle_s:g} s and no end: "
                                "the speaker went away mid-command", aborted=False)
        latest = None  # the last pause in what has arrived
        for piece in pieces:
            after, heard_at = piece.id, time.monotonic()
            if piece.abort is not None:
                raise SpeechStopped(piece.abort, aborted=True)
            if piece.end:
                still = ready is not None and pauses is not None and \
                    pauses.spoken_until <= ready[0]
                if still and ready is not None:
                    return Heard(bytes(pcm), ready[1], piece.ended_at, at_pause=True,
                                 live=hearing is not None)
                if hearing is not None:
                    hearing.feed(bytes(held))  # (none is held unless ``ready``)
                    return Heard(bytes(pcm), hearing.finish() if pcm else None, piece.ended_at,
                                 live=True)
                return Heard(bytes(pcm), None, piece.ended_at)
            pcm += piece.pcm
            if len(pcm) > settings.turns.max_audio_bytes:  # the writer's limit, kept here too
                raise SpeechStopped("the audio is over the limit of "
                                    f"{settings.turns.max_audio_bytes}"
                                    " bytes (VOXQUEUE_MAX_AUDIO_BYTES)", aborted=False,
                                    code=ErrorCode.AUDIO_INVALID)
            for upto in pauses.feed(piece.pcm) if pauses is not None else ():
                latest = upto
            if hearing is not None:
                # After a transcript decoded at a pause, silence is only kept: the engine
                # hears it (and all before it again) only if the speaker goes on.
                held += piece.pcm
                if ready is None or pauses is None or pauses.spoken_until > ready[0]:
                    ready = None
                    hearing.feed(bytes(held))
                    held.clear()
        # Only a pause the speaker is still in is worth decoding: one already followed by
        # speech (a decode ran long, the audio went on) would be decoded for nothing.
        in_pause = pauses is not None and pauses.spoken_until <= (latest or said[0])
        if not in_pause or (latest is None and hearing is None):
            continue
        started = time.perf_counter()
        if hearing is not None:
            if latest is not None:
                hearing.pause()
            partial = hearing.partial()  # an engine's words may arrive during the pause
            if latest is None and partial.text == said[1]:
                continue
        else:
            assert latest is not None
            partial = transcriber.transcribe(bytes(pcm[:latest]), deadline=spec.deadline)
            ready = (latest, partial)
        at = latest if latest is not None else said[0]
        said = (at, partial.text)
        whole = bool(partial.text) and complete(partial.text)
        stage.emit("stt-partial", {
            "text": partial.text, "complete": whole,
            "unfinished": bool(partial.text) and unfinished(partial.text),
            "at_s": round(at / (2 * SAMPLE_RATE), 2),
            "ms": round((time.perf_counter() - started) * 1000, 1)})
        if hearing is not None and whole:
            # Most likely the end: finish now, while the device waits out its silence.
            ready = (at, hearing.finish())
