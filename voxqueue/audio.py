"""Reading, checking and converting utterances to the pipeline's format: 16 kHz mono int16 PCM.

numpy is imported by the functions that compute on samples, when first called: a process that
only needs the format's constants (``voxqueue up``, Flower) does not hold it.
"""

from __future__ import annotations

import io
import wave
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

SAMPLE_RATE = 16000
SAMPLE_WIDTH = 2


class AudioError(ValueError):
    """Audio that cannot be used, with a message that says why."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Pcm:
    """16-bit little-endian mono samples at ``rate`` Hz."""

    data: bytes
    rate: int = SAMPLE_RATE

    @property
    def seconds(self) -> float:
        return len(self.data) / (SAMPLE_WIDTH * self.rate)


def check_size(n_bytes: int, max_bytes: int) -> None:
    if n_bytes == 0:
        raise AudioError("audio-invalid", "the audio is empty")
    if n_bytes > max_bytes:
        raise AudioError(
            "audio-too-large",
            f"the audio is {n_bytes / 1e6:.1f} MB, over the limit of {max_bytes / 1e6:.1f} MB "
            "(VOXQUEUE_MAX_AUDIO_BYTES)",
        )


def read_wav(data: bytes, *, max_bytes: int, max_seconds: float) -> Pcm:
    """Decode a PCM WAV file into 16 kHz mono int16, refusing empty, corrupt or oversized audio.

    Stereo and other sample rates are converted, not refused.
    """
    check_size(len(data), max_bytes)
    if data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise AudioError("audio-invalid", "the audio is not a WAV file (no RIFF/WAVE header)")
    try:
        with wave.open(io.BytesIO(data), "rb") as w:
            channels, width, rate, n_frames = (
                w.getnchannels(), w.getsampwidth(), w.getframerate(), w.getnframes())
            if rate <= 0 or channels <= 0:
                raise AudioError("audio-invalid", "the WAV header is corrupt")
            if n_frames / rate > max_seconds:
                raise AudioError(
                    "audio-too-long",
                    f"the audio lasts {n_frames / rate:.1f} s, over the limit of "
                    f"{max_seconds:.0f} s (VOXQUEUE_MAX_AUDIO_SECONDS)",
                )
            frames = w.readframes(n_frames)
    except (wave.Error, EOFError) as exc:
        raise AudioError("audio-invalid", f"the WAV file cannot be read: {exc}") from exc
    usable = len(frames) - len(frames) % (width * channels)
    if usable == 0:
        raise AudioError("audio-invalid", "the WAV file holds no samples (empty or truncated)")
    if (channels, width, rate) == (1, SAMPLE_WIDTH, SAMPLE_RATE):
        return Pcm(data=frames[:usable])
    samples = _to_float(frames[:usable], width).reshape(-1, channels).mean(axis=1)
    return Pcm(data=_float_to_pcm16(resample(samples, rate, SAMPLE_RATE)))


def from_pcm(data: bytes, *, max_bytes: int, max_seconds: float, rate: int = SAMPLE_RATE) -> Pcm:
    """Raw 16-bit mono PCM at ``rate`` Hz, checked against the limits and resampled to 16 kHz."""
    import numpy as np
    check_size(len(data), max_bytes)
    if len(data) % 2:
        data = data[:-1]
    pcm = Pcm(data=data, rate=rate)
    if pcm.seconds > max_seconds:
        raise AudioError("audio-too-long", f"the audio lasts {pcm.seconds:.1f} s, over the "
                         f"limit of {max_seconds:.0f} s (VOXQUEUE_MAX_AUDIO_SECONDS)")
    if rate != SAMPLE_RATE:
        samples = np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768.0
        return Pcm(data=_float_to_pcm16(resample(samples, rate, SAMPLE_RATE)))
    return pcm


def read_speech(audio: str | Path | bytes, *, max_bytes: int, max_seconds: float,
                pcm_rate: int | None = None) -> Pcm:
    """A spoken question as a caller hands it over: a WAV path, WAV bytes, or raw 16-bit PCM
    at ``pcm_rate``; checked against the limits (a file's size before it is read) and
    converted."""
    if isinstance(audio, str | Path):
        path = Path(audio)
        if not path.is_file():
            raise AudioError("audio-invalid", f"no such audio file: {path}")
        check_size(path.stat().st_size, max_bytes)
        audio = path.read_bytes()
    if pcm_rate is not None:
        return from_pcm(audio, max_bytes=max_bytes, max_seconds=max_seconds, rate=pcm_rate)
    return read_wav(audio, max_bytes=max_bytes, max_seconds=max_seconds)


def resample(samples: np.ndarray, src_rate: int, dst_rate: int) -> np.ndarray:
    """Linear-interpolation resampling: enough for speech recognition and playback."""
    import numpy as np
    if src_rate == dst_rate or samples.size == 0:
        return samples
    n_out = max(1, round(samples.size * dst_rate / src_rate))
    positions = np.arange(n_out) * (src_rate / dst_rate)
    return np.interp(positions, np.arange(samples.size), samples).astype(np.float32)


def to_wav(pcm: bytes, rate: int = SAMPLE_RATE) -> bytes:
    """Wrap 16-bit mono PCM in a WAV container."""
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(SAMPLE_WIDTH)
        w.setframerate(rate)
        w.writeframes(pcm)
    return buf.getvalue()


def rms(pcm: bytes) -> float:
    """Root-mean-square level of 16-bit PCM, 0..32768."""
    import numpy as np
    if len(pcm) < 2:
        return 0.0
    samples = np.frombuffer(pcm[: len(pcm) - len(pcm) % 2], dtype="<i2").astype(np.float64)
    return float(np.sqrt(np.mean(samples**2)))


def _to_float(frames: bytes, width: int) -> np.ndarray:
    import numpy as np
    if width == 1:
        return (np.frombuffer(frames, dtype=np.uint8).astype(np.float32) - 128.0) / 128.0
    if width == 2:
        return np.frombuffer(frames, dtype="<i2").astype(np.float32) / 32768.0
    if width == 3:
        raw = np.frombuffer(frames, dtype=np.uint8).reshape(-1, 3).astype(np.int32)
        ints = raw[:, 0] | (raw[:, 1] << 8) | (raw[:, 2] << 16)
        ints = np.where(ints & 0x800000, ints - 0x1000000, ints)
        return ints.astype(np.float32) / 8388608.0
    if width == 4:
        return np.frombuffer(frames, dtype="<i4").astype(np.float32) / 2147483648.0
    raise AudioError("audio-invalid", f"unsupported sample width: {width} bytes")


def _float_to_pcm16(samples: np.ndarray) -> bytes:
    import numpy as np
    return (np.clip(samples, -1.0, 1.0) * 32767.0).astype("<i2").tobytes()
