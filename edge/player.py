"""Where replies are heard: the speaker, one WAV file per reply, or nowhere. Stoppable.

A :class:`Player` writes a reply's chunks as they come, 100 ms at a time, and stops within
one piece when its stop event is set (barge-in). Files and the null output can be paced at
real time, so a reply "plays" as long as it would through a speaker.
"""

from __future__ import annotations

import re
import threading
import time
import wave
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from edge.frames import RATE, SAMPLE_BYTES

PIECE_BYTES = RATE * SAMPLE_BYTES // 10  # 100 ms


class PlayerError(RuntimeError):
    """The output cannot be opened."""


class Stream(Protocol):
    def write(self, pcm: bytes) -> None: ...

    def close(self, *, abort: bool) -> None: ...


class Output(Protocol):
    paced: bool
    """True when ``write`` does not itself take as long as the audio lasts."""

    def open(self, name: str) -> Stream: ...


@dataclass(frozen=True)
class Played:
    name: str
    bytes: int
    stopped: bool
    path: Path | None = None
    first_at: float | None = None
    """Wall clock when the first audio was in hand."""

    @property
    def seconds(self) -> float:
        return self.bytes / (RATE * SAMPLE_BYTES)


class Player:
    """Plays one thing at a time on an output."""

    def __init__(self, output: Output, *, realtime: bool = True) -> None:
        self.output = output
        self.realtime = realtime
        """Pace an output that does not pace itself (files, null)."""
        self.history: list[Played] = []

    def play(
        self, chunks: Iterable[bytes], name: str, stop: threading.Event | None = None
    ) -> Played:
        """Write ``chunks`` (16 kHz mono int16) as they come; stop early when ``stop`` is set."""
        stop = stop or threading.Event()
        stream: Stream | None = None
        played = 0
        stopped = False
        first_at = None
        try:
            for chunk in chunks:
                first_at = first_at or time.time()
                if stop.is_set():
                    stopped = True
                    break
                if stream is None:
                    stream = self.output.open(name)
                for start in range(0, len(chunk), PIECE_BYTES):
                    if stop.is_set():
                        stopped = True
                        break
                    piece = chunk[start : start + PIECE_BYTES]
                    stream.write(piece)
                    played += len(piece)
                    if (
                        self.realtime
                        and self.output.paced
                        and stop.wait(len(piece) / (RATE * SAMPLE_BYTES))
                    ):
                        stopped = True
                        break
                if stopped:
                    break
            stopped = stopped or stop.is_set()
        finally:
            if stream is not None:
                stream.close(abort=stopped)
        result = Played(name, played, stopped, getattr(stream, "path", None), first_at)
        self.history.append(result)
        return result


class NullOutput:
    """Discards audio (benchmarks, a device without a speaker)."""

    paced = True

    def open(self, name: str) -> Stream:
        return _NullStream()


class _NullStream:
    def write(self, pcm: bytes) -> None:
        return None

    def close(self, *, abort: bool) -> None:
        return None


class WavDirOutput:
    """One WAV file per reply, announcement or earcon: ``NNN-<name>.wav`` in ``folder``."""

    paced = True

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise PlayerError(f"cannot write to {folder}: {exc}") from exc
        numbers = [int(p.name[:3]) for p in self.folder.glob("[0-9][0-9][0-9]-*.wav")]
        self._count = max(numbers, default=0)
        self._lock = threading.Lock()

    def open(self, name: str) -> Stream:
        with self._lock:
            self._count += 1
            n = self._count
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", name)[:80]
        return _WavStream(self.folder / f"{n:03d}-{safe}.wav")


class _WavStream:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._w = wave.open(str(path), "wb")  # noqa: SIM115 (closed in close())
        self._w.setnchannels(1)
        self._w.setsampwidth(SAMPLE_BYTES)
        self._w.setframerate(RATE)

    def write(self, pcm: bytes) -> None:
        self._w.writeframes(pcm)

    def close(self, *, abort: bool) -> None:
        self._w.close()


class SpeakerOutput:
    """The sound card through sounddevice; ``write`` blocks, so it paces itself."""

    paced = False

    def __init__(self, device: str | int | None = None) -> None:
        try:
            import sounddevice
        except OSError as exc:  # PortAudio missing
            raise PlayerError(f"no sound output: {exc} (install libportaudio2)") from exc
        self._sd: Any = sounddevice
        self.device = int(device) if isinstance(device, str) and device.isdigit() else device

    def open(self, name: str) -> Stream:
        try:
            stream = self._sd.RawOutputStream(
                samplerate=RATE, channels=1, dtype="int16", device=self.device
            )
            stream.start()
        except Exception as exc:  # PortAudioError
            raise PlayerError(f"cannot open the speaker: {exc}") from exc
        return _SpeakerStream(stream)


class _SpeakerStream:
    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, pcm: bytes) -> None:
        self._stream.write(pcm)

    def close(self, *, abort: bool) -> None:
        try:
            if abort:
                self._stream.abort()  # drop what is buffered: the user is talking
            else:
                self._stream.stop()  # let the buffer play out
        finally:
            self._stream.close()
