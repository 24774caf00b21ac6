"""A microphone for ``wyoming-satellite --mic-command``: raw 16 kHz mono 16-bit PCM on stdout,
paced in real time: a second of silence, each WAV given, then silence until killed.

    python -m testkit.fakes.mic_from_wav speech.wav [more.wav ...]
"""

from __future__ import annotations

import sys
import time
import wave

CHUNK = 1024  # samples, as the satellite reads them


def pcm_of(path: str) -> bytes:
    with wave.open(path, "rb") as wav:
        assert (wav.getframerate(), wav.getsampwidth(), wav.getnchannels()) == (16000, 2, 1)
        return wav.readframes(wav.getnframes())


def main(paths: list[str]) -> None:
    audio = bytes(32000) + b"".join(pcm_of(p) + bytes(48000) for p in paths)
    out = sys.stdout.buffer
    start = time.monotonic()
    sent = 0
    while True:
        part = audio[sent:sent + CHUNK * 2] if sent < len(audio) else bytes(CHUNK * 2)
        part = part + bytes(CHUNK * 2 - len(part))
        out.write(part)
        out.flush()
        sent += len(part)
        ahead = start + sent / 32000 - time.monotonic()
        if ahead > 0:
            time.sleep(ahead)


if __name__ == "__main__":
    main(sys.argv[1:])
