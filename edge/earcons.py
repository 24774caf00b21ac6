"""Short local sounds made with numpy: the device needs no TTS to say something went wrong."""

from __future__ import annotations

from functools import cache

import numpy as np

from edge.frames import RATE


def tone(
    freqs: list[float], note_s: float = 0.12, gap_s: float = 0.04, amplitude: float = 0.25
) -> bytes:
    """Notes one after another, each with a soft attack and release, as 16 kHz int16 PCM."""
    n = int(note_s * RATE)
    ramp = min(n // 4, int(0.01 * RATE))
    envelope = np.ones(n, dtype=np.float32)
    envelope[:ramp] = np.linspace(0, 1, ramp)
    envelope[n - ramp :] = np.linspace(1, 0, ramp)
    t = np.arange(n, dtype=np.float32) / RATE
    gap = np.zeros(int(gap_s * RATE), dtype=np.float32)
    parts: list[np.ndarray] = []
    for freq in freqs:
        parts += [np.sin(2 * np.pi * freq * t) * envelope, gap]
    wave = np.concatenate(parts) * amplitude
    return (wave * 32767).astype("<i2").tobytes()


@cache
def earcon(name: str) -> bytes:
    """``unreachable`` (the server is gone) or ``sorry`` (this command got no answer)."""
    sounds = {
        "unreachable": ([660.0, 440.0, 330.0], 0.14),
        "sorry": ([392.0, 311.0], 0.16),
    }
    if name not in sounds:
        raise KeyError(f"no earcon named {name!r}: {sorted(sounds)}")
    freqs, note_s = sounds[name]
    return tone(freqs, note_s)
