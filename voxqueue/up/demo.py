"""``voxqueue demo``: start a whole system on this machine, ask one spoken question, show it all."""

from __future__ import annotations

import time
from importlib import resources
from pathlib import Path

from rich.console import Console
from rich.table import Table

from voxqueue.client.direct import Client
from voxqueue.contracts import TurnResult
from voxqueue.settings import QUEUES, Settings
from voxqueue.up.supervisor import Supervisor

SAMPLE = "what_is_twelve_times_thirteen.wav"


#: How the demo names the offline providers.
OFFLINE_LABELS = {"pocketsphinx": "pocketsphinx (offline)", "whisper": "whisper (offline)",
                  "local": "local intents (offline)", "piper": "piper (offline)"}


def sample_path() -> Path:
    """The spoken question shipped with the package."""
    return Path(str(resources.files("voxqueue") / "samples" / SAMPLE))


def record_question(console: Console, max_s: float = 15.0) -> bytes:
    """One question from the microphone: from the first speech to a trailing silence.

    Raises ``edge.sources.SourceError`` when there is no usable microphone.
    """
    from edge.capture import Capture, State
    from edge.sources import MicSource
    from edge.vad import WebrtcVad

    mic = MicSource()
    capture = Capture(WebrtcVad(), max_s=max_s, no_speech_s=8.0)
    capture.begin()
    console.print("[bold]Listening: ask your question…[/]")
    try:
        for frame in mic.frames():
            if capture.feed(frame) in (State.ENDED, State.TIMEOUT):
                break
    finally:
        mic.close()
    if capture.state is State.TIMEOUT:
        raise RuntimeError("no speech heard from the microphone")
    return capture.take()


def run_demo(settings: Settings, wav: Path | bytes | None, audio_out: Path, console: Console,
             log_dir: Path) -> TurnResult:
    """Start Redis (embedded if needed) and the workers, run one spoken turn, stop everything.

    ``wav`` is a WAV file, 16 kHz PCM from the microphone, or None for the bundled sample.
    """
    sup = Supervisor(settings, log_dir=log_dir)
    question = wav if wav is not None else sample_path()
    try:
        with console.status("Checking Redis…") as status:
            _url, embedded = sup.ensure_redis()
            console.print(("[yellow]No Redis answered: started an embedded one[/] "
                           if embedded else "Redis: ") + sup.describe_redis())
            for stage, name in sup.settings.providers.in_use().items():
                console.print(f"  {stage}: {OFFLINE_LABELS.get(name, name)}")
            status.update("Starting a worker per queue and loading models…")
            started = time.time()
            sup.start_workers(queues=QUEUES)
            sup.wait_for_workers(QUEUES, timeout=120)
            console.print(f"Workers ready in {time.time() - started:.1f} s "
                          f"(logs in {log_dir})")
            status.update("Asking…")
            with Client(sup.settings) as client:
                if isinstance(question, bytes):
                    turn = client.say(question, session="demo", pcm_rate=16000)
                else:
                    turn = client.say(question, session="demo")
                for entry in turn.events():
                    ev = entry.event
                    if ev.type == "stt-end":
                        console.print(f"[bold]You said:[/] {ev.data.get('text')}")
                        status.update("Thinking…")
                    elif ev.type == "tool-end":
                        console.print(f"  [cyan]tool[/] {ev.data.get('name')} → "
                                      f"{ev.data.get('result') or ev.data.get('error')}")
                    elif ev.type == "reply":
                        console.print(f"[bold]Assistant:[/] {ev.data.get('text')}")
                        status.update("Speaking…")
                result = turn.wait()
                if turn.audio():
                    result.audio_path = str(turn.save_audio(audio_out))
    finally:
        sup.stop_all()
    table = Table("stage", "ms", title="Time per stage")
    for stage, ms in result.timings.items():
        table.add_row(stage, f"{ms:.0f}")
    console.print(table)
    if result.audio_path:
        console.print(f"Reply audio: {result.audio_path}")
    if result.status != "ok" and result.error:
        console.print(f"[red]error {result.error['code']}[/]: {result.error['message']}")
    return result
