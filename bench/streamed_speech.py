"""The command sent while it is spoken, against the whole command sent at its end.

    .venv/bin/python -m bench.streamed_speech [--rounds 2]

For each system (offline with Whisper, offline with pocketsphinx, the fake cloud providers with
``bench.latency``'s profile: a streamed command on OpenAI's Realtime transcription session, and
uploaded at its end, each transcript 0.30 s after its audio is committed or uploaded), real
worker processes and a private Redis; the real edge
(``voxqueue edge --wav F --realtime --json``) on the wake-word fixtures whose tools need no
network, read at the pace of speech, with and without ``--no-stream``, alternating, in one run.
Per command, from the edge's own JSON line: speech end (last voiced frame) → first reply audio
in hand, the silence waited for, and the command's end → its transcript.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.harness import BenchSystem, bench_system
from bench.latency import PROFILE
from testkit import ROOT, SPEECH

#: Wake word, command, and the transcript the fake cloud STT gives for it.
COMMANDS = {
    "hey_jarvis_time_tokyo.wav": "What time is it in Tokyo?",
    "okay_nabu_timer.wav": "Set a timer for five minutes.",
    "alexa_multiply.wav": "What is twelve times thirteen?",
}
SYSTEMS = {
    "offline, whisper": {"offline": True, "env": {"VOXQUEUE_STT": "whisper"}},
    "offline, whisper, 0.12 s pause": {
        "offline": True, "env": {"VOXQUEUE_STT": "whisper", "VOXQUEUE_STT_DECODE_PAUSE_S": "0.12"}},
    "offline, whisper, before 2026-12-08 (15 s window)": {
        "offline": True, "env": {"VOXQUEUE_STT": "whisper", "VOXQUEUE_WHISPER_FIT_WINDOW": "0"}},
    "offline, pocketsphinx": {"offline": True, "env": {"VOXQUEUE_STT": "pocketsphinx"}},
    "cloud (fake), Realtime session": {"offline": False, "env": {}},
    "cloud (fake), upload at the end": {"offline": False,
                                        "env": {"VOXQUEUE_OPENAI_STT_TRANSPORT": "upload"}},
}


def with_silence(name: str, out: Path) -> Path:
    """The fixture and two seconds of silence (the command ends by silence, not the file)."""
    import wave

    with wave.open(str(SPEECH / name)) as w:
        pcm = w.readframes(w.getnframes())
    path = out / name
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(pcm + bytes(64000))
    return path


def edge_once(system: BenchSystem, wav: Path, stream: bool, out: Path) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "voxqueue.cli", "edge", "--wav", str(wav), "--realtime", "--json",
         "--stream" if stream else "--no-stream", "--audio-out", str(out),
         "--no-announcements", "-w", "hey_jarvis", "-w", "okay_nabu", "-w", "alexa"],
        env={**system.sup.env, "VOXQUEUE_EDGE_DEVICE": "bench-edge"}, cwd=ROOT,
        capture_output=True, text=True, timeout=120)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or len(lines) != 1 or lines[0]["status"] != "ok":
        raise RuntimeError(f"edge run failed: {done.stdout}\n{done.stderr[-2000:]}")
    return dict(lines[0])


def measure(name: str, spec: dict[str, Any], rounds: int, tmp: Path) -> dict[bool, list[dict]]:
    runs: dict[bool, list[dict]] = {True: [], False: []}
    profile = None if spec["offline"] else PROFILE
    with bench_system(profile, separate_fake=True, offline=spec["offline"],
                      queues=("stt", "agent", "tools", "tts"), **spec["env"]) as system:
        wavs = {n: with_silence(n, tmp) for n in COMMANDS}
        for n, text in COMMANDS.items():  # warm every model and path once
            system.fake.set_default_transcript(text)
            edge_once(system, wavs[n], True, tmp / "warm")
        for r in range(rounds):
            for n, text in COMMANDS.items():
                system.fake.set_default_transcript(text)
                for stream in ((True, False) if r % 2 == 0 else (False, True)):
                    runs[stream].append(edge_once(system, wavs[n], stream, tmp / "out"))
    return runs


def p50(runs: list[dict], key: str) -> float:
    return statistics.median(float(r[key]) for r in runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--systems", default=";".join(SYSTEMS), help="names, ;-separated")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.systems.split(";"):
            runs = measure(name, SYSTEMS[name], args.rounds, Path(tmp))
            s, w = runs[True], runs[False]
            first_s, first_w = (p50(s, "speech_end_to_first_audio_ms"),
                                p50(w, "speech_end_to_first_audio_ms"))
            rows.append(
                f"| {name} | {first_w:.0f} | {first_s:.0f} | {first_s / first_w:.2f} | "
                f"{p50(w, 'endpoint_wait_ms'):.0f} → {p50(s, 'endpoint_wait_ms'):.0f} | "
                f"{p50(w, 'transcript_ms'):.0f} → {p50(s, 'transcript_ms'):.0f} | {len(s)} |")
            print(rows[-1], flush=True)
    print("\nms, p50 of each; whole = --no-stream (today's path), streamed = the default")
    print("| system | speech end → first audio, whole | streamed | streamed / whole | "
          "endpoint wait, whole → streamed | end → transcript, whole → streamed | commands |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
