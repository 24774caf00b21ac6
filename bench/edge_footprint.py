"""The edge device's footprint: CPU per second of audio for wake word + VAD, and memory.

    .venv/bin/python -m bench.edge_footprint [--minutes 5]

CPU: every speech fixture concatenated and repeated into one long stream, run through the
device's own listening pipeline (:class:`edge.pipeline.Listener`: wake word, pre-roll, VAD,
capture), commands discarded (a null sink); ``time.process_time`` over the audio's duration,
i.e. the fraction of one core. Memory: the peak resident set (``ru_maxrss``) of a fresh
process running the whole device (client, threads, pipeline) on a WAV file.
Targets: under 0.03 of a core and 150 MB.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
import wave
from typing import Any

from edge.frames import FRAME_BYTES, frames_of
from testkit import ROOT, SPEECH, free_port

TARGET_CORE = 0.03
TARGET_MB = 150.0


def long_stream(minutes: float) -> bytes:
    """The fixtures end to end, repeated to at least ``minutes`` of audio."""
    parts = []
    for path in sorted(SPEECH.glob("*.wav")):
        with wave.open(str(path)) as w:
            parts.append(w.readframes(w.getnframes()))
    once = b"".join(parts)
    repeat = max(1, int(minutes * 60 * 32000 / len(once)) + 1)
    return once * repeat


def cpu_per_audio_second(pcm: bytes, **settings: Any) -> tuple[float, int]:
    """Fraction of a core the listening pipeline uses, and how many commands it heard."""
    from edge.pipeline import Listener, Utterance
    from edge.settings import EdgeSettings

    listener = Listener.from_settings(EdgeSettings(_env_file=None, **settings))  # type: ignore[call-arg]
    frames = list(frames_of(pcm))
    commands = 0
    start = time.process_time()
    for frame in frames:
        if isinstance(listener.feed(frame), Utterance):
            commands += 1  # the null sink: nothing is sent
    used = time.process_time() - start
    return used / (len(frames) * FRAME_BYTES / 32000), commands


def vad_alone(pcm: bytes, kind: str) -> float:
    """Fraction of a core for the VAD run on every frame (the worst case)."""
    from edge.vad import make_vad

    vad = make_vad(kind)
    frames = list(frames_of(pcm))
    start = time.process_time()
    for frame in frames:
        vad.is_speech(frame)
    return (time.process_time() - start) / (len(frames) * FRAME_BYTES / 32000)


def device_memory_mb() -> float:
    """Peak resident memory of a fresh process running the whole device."""
    code = (
        "import resource\n"
        "from edge.device import Device\n"
        "from edge.display import Display\n"
        "from edge.player import NullOutput, Player\n"
        "from edge.settings import EdgeSettings\n"
        "from edge.sources import WavSource\n"
        "from voxqueue.settings import ClientSettings, RedisSettings, ignore_dotenv\n"
        "ignore_dotenv()\n"
        f"s = ClientSettings(redis=RedisSettings(url='redis://127.0.0.1:{free_port()}/0'))\n"
        "e = EdgeSettings(_env_file=None, device='bench', earcons=False,\n"
        "                 wake_words=['okay_nabu', 'hey_jarvis', 'hey_mycroft', 'alexa'])\n"
        f"src = WavSource({str(SPEECH / 'speech_without_wake_word.wav')!r})\n"
        "Device(e, s, src, Player(NullOutput()), Display(quiet=True), announcements=False).run()\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr)
    return int(proc.stdout.strip().splitlines()[-1]) / 1024  # Linux reports kilobytes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--minutes", type=float, default=5.0, help="Audio to process.")
    parser.add_argument("--json", action="store_true", help="Print one JSON object.")
    args = parser.parse_args()
    pcm = long_stream(args.minutes)
    seconds = len(pcm) / 32000
    figures: dict[str, Any] = {"audio_s": round(seconds, 1)}
    configs: dict[str, dict[str, Any]] = {
        "default (okay_nabu + hey_jarvis, webrtc VAD)": {},
        "4 wake words, webrtc VAD": {
            "wake_words": ["okay_nabu", "hey_jarvis", "hey_mycroft", "alexa"]
        },
        "4 wake words, micro VAD": {
            "wake_words": ["okay_nabu", "hey_jarvis", "hey_mycroft", "alexa"],
            "vad": "micro",
        },
        "1 wake word, webrtc VAD": {"wake_words": ["okay_nabu"]},
    }
    rows = []
    for name, settings in configs.items():
        core, commands = cpu_per_audio_second(pcm, **settings)
        rows.append((name, core, commands))
        figures[name] = {"core": round(core, 4), "commands": commands}
    figures["webrtc VAD on every frame"] = {"core": round(vad_alone(pcm, "webrtc"), 4)}
    figures["micro VAD on every frame"] = {"core": round(vad_alone(pcm, "micro"), 4)}
    figures["device_maxrss_mb"] = round(device_memory_mb(), 1)
    figures["this_process_maxrss_mb"] = round(
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1
    )
    if args.json:
        print(json.dumps(figures))
        return
    print(f"audio: {seconds:.0f} s (every speech fixture, repeated)")
    print(f"{'pipeline':<48} {'core':>8} {'commands':>9}")
    for name, core, commands in rows:
        flag = "ok" if core < TARGET_CORE else "OVER"
        print(f"{name:<48} {core:8.4f} {commands:9d}  {flag} (target < {TARGET_CORE})")
    for name in ("webrtc VAD on every frame", "micro VAD on every frame"):
        print(f"{name:<48} {figures[name]['core']:8.4f}")
    mb = figures["device_maxrss_mb"]
    flag = "ok" if mb < TARGET_MB else "OVER"
    print(f"device process peak RSS: {mb:.1f} MB  {flag} (target < {TARGET_MB:.0f} MB)")


if __name__ == "__main__":
    main()
