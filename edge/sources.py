"""Where the audio comes from: the microphone, a WAV file or raw PCM on stdin.

Every source yields 10 ms frames (320 bytes of 16 kHz mono int16); everything after the source
is one code path. ``live`` tells whether frames arrive at the pace of speech (a microphone, a
pipe, ``--realtime``): then replies play while the device keeps listening (barge-in). A file read
as fast as possible is not live: the device waits for each reply before reading on.
"""

from __future__ import annotations

import os
import queue
import stat
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, Protocol

from edge.frames import FRAME_BYTES, FRAME_S, FRAME_SAMPLES, RATE, frames_of
from voxqueue.audio import AudioError, read_wav


class SourceError(RuntimeError):
    """The source cannot be opened (no file, no sound card...)."""


class Source(Protocol):
    live: bool

    def frames(self) -> Iterator[bytes]: ...

    def close(self) -> None: ...


def paced(frames: Iterable[bytes], frame_s: float = FRAME_S) -> Iterator[bytes]:
    """Yield frames no faster than real time."""
    start = time.monotonic()
    for n, frame in enumerate(frames):
        ahead = start + n * frame_s - time.monotonic()
        if ahead > 0:
            time.sleep(ahead)
        yield frame


class WavSource:
    """A WAV file (any rate or channel count, converted); ``realtime`` paces it."""

    def __init__(self, path: Path, *, realtime: bool = False) -> None:
        try:
            data = Path(path).read_bytes()
            self.pcm = read_wav(data, max_bytes=len(data) + 1, max_seconds=float("inf")).data
        except (OSError, AudioError) as exc:
            raise SourceError(f"cannot read {path}: {exc}") from exc
        self.live = realtime

    def frames(self) -> Iterator[bytes]:
        frames = frames_of(self.pcm)
        return paced(frames) if self.live else frames

    def close(self) -> None:
        return None


class StdinSource:
    """Raw 16 kHz mono int16 PCM on a stream (``arecord -f S16_LE -r 16000 -c 1 | ...``).

    A pipe or terminal is live; a regular file (``< audio.raw``) is read as fast as possible
    unless ``realtime`` paces it.
    """

    def __init__(self, stream: BinaryIO | None = None, *, realtime: bool = False) -> None:
        self.stream = stream if stream is not None else sys.stdin.buffer
        self.realtime = realtime
        self.live = realtime or not _is_regular_file(self.stream)

    def _read(self) -> Iterator[bytes]:
        while True:
            frame = self.stream.read(FRAME_BYTES)
            if not frame:
                return
            while len(frame) < FRAME_BYTES:
                more = self.stream.read(FRAME_BYTES - len(frame))
                if not more:
                    yield frame + bytes(FRAME_BYTES - len(frame))
                    return
                frame += more
            yield frame

    def frames(self) -> Iterator[bytes]:
        return paced(self._read()) if self.realtime else self._read()

    def close(self) -> None:
        return None


class MicSource:
    """The sound card through sounddevice (PortAudio), 10 ms blocks."""

    live = True

    def __init__(
        self, device: str | int | None = None, max_queued_s: float = 2.0, stall_s: float = 5.0
    ) -> None:
        try:
            import sounddevice
        except OSError as exc:  # PortAudio missing
            raise SourceError(f"no sound input: {exc} (install libportaudio2)") from exc
        self._queue: queue.Queue[bytes] = queue.Queue(maxsize=int(max_queued_s / FRAME_S))
        self.dropped = 0
        self.stall_s = stall_s
        self._closed = False
        try:
            self._stream: Any = sounddevice.RawInputStream(
                samplerate=RATE,
                channels=1,
                dtype="int16",
                blocksize=FRAME_SAMPLES,
                device=_device(device),
                callback=self._on_audio,
            )
            self._stream.start()
        except Exception as exc:  # PortAudioError and friends
            raise SourceError(f"cannot open the microphone: {exc}") from exc

    def _on_audio(self, data: Any, n_frames: int, time_info: Any, status: Any) -> None:
        try:
            self._queue.put_nowait(bytes(data))
        except queue.Full:  # the device fell behind: drop rather than grow
            self.dropped += 1

    def frames(self) -> Iterator[bytes]:
        pending = b""
        last = time.monotonic()
        while not self._closed:
            try:
                pending += self._queue.get(timeout=0.5)
                last = time.monotonic()
            except queue.Empty:
                if time.monotonic() - last > self.stall_s:
                    raise SourceError(
                        f"the microphone sent nothing for {self.stall_s:g} s"
                    ) from None
                continue
            while len(pending) >= FRAME_BYTES:
                yield pending[:FRAME_BYTES]
                pending = pending[FRAME_BYTES:]

    def close(self) -> None:
        self._closed = True
        try:
            self._stream.stop()
            self._stream.close()
        except Exception:  # noqa: S110 (closing a broken stream: nothing more to do)
            pass


def _device(device: str | int | None) -> str | int | None:
    if isinstance(device, str) and device.strip().isdigit():
        return int(device)
    return device


def _is_regular_file(stream: BinaryIO) -> bool:
    try:
        return stat.S_ISREG(os.fstat(stream.fileno()).st_mode)
    except (OSError, ValueError, AttributeError):
        return False
