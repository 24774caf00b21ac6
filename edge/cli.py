"""``voxqueue edge``: run the device from the microphone, a WAV file or stdin.

Only typer is imported here at module level; the audio stack loads when the command runs.
"""

from __future__ import annotations

import logging
import signal
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

app = typer.Typer(add_completion=False, help="Run the voxqueue edge device.")


@app.command()
def edge_command(
    wav: Annotated[Path | None, typer.Option("--wav", help="Listen to a WAV file.")] = None,
    stdin: Annotated[
        bool, typer.Option("--stdin", help="Listen to raw 16 kHz mono int16 PCM on stdin.")
    ] = False,
    realtime: Annotated[
        bool,
        typer.Option(
            "--realtime",
            help="Read --wav/--stdin at the pace of speech (replies overlap "
            "listening, as with a microphone).",
        ),
    ] = False,
    wake_word: Annotated[
        list[str] | None,
        typer.Option(
            "--wake-word",
            "-w",
            help="okay_nabu, hey_jarvis, hey_mycroft or alexa; repeat for several.",
        ),
    ] = None,
    audio_out: Annotated[
        Path | None,
        typer.Option(
            "--audio-out",
            help="Write each reply to a WAV file in this folder instead of playing it.",
        ),
    ] = None,
    device: Annotated[str | None, typer.Option(help="Device id (default: the host name).")] = None,
    session: Annotated[str | None, typer.Option(help="A fixed session id.")] = None,
    silence: Annotated[
        str | None,
        typer.Option(
            help="Trailing silence ending a command: relaxed, default, aggressive or seconds."
        ),
    ] = None,
    vad: Annotated[str | None, typer.Option(help="webrtc or micro.")] = None,
    wake_engine: Annotated[
        str | None, typer.Option(help="micro (pymicro-wakeword) or openwakeword.")
    ] = None,
    max_seconds: Annotated[float | None, typer.Option(help="Longest command, seconds.")] = None,
    no_speech_timeout: Annotated[
        float | None, typer.Option(help="Seconds to wait for speech after the wake word.")
    ] = None,
    follow_up: Annotated[
        float | None,
        typer.Option(help="Seconds to listen without the wake word after a question (0: never)."),
    ] = None,
    cooldown: Annotated[
        float | None, typer.Option(help="Seconds during which the wake word is not heard again.")
    ] = None,
    deadline: Annotated[float | None, typer.Option(help="Turn deadline, seconds.")] = None,
    stream: Annotated[bool | None, typer.Option(
        "--stream/--no-stream",
        help="Send the command while it is spoken (default), or whole once it ended.")] = None,
    end_early: Annotated[float | None, typer.Option(
        help="Silence that ends a command the server already understood (0: never).")] = None,
    wait_unfinished: Annotated[float | None, typer.Option(
        help="Silence that ends a command heard to stop mid-sentence (0: the usual).")] = None,
    earcons: Annotated[
        bool | None, typer.Option("--earcons/--no-earcons", help="Short sounds for errors.")
    ] = None,
    announcements: Annotated[
        bool,
        typer.Option(
            "--announcements/--no-announcements", help="Speak what the server sends unasked."
        ),
    ] = True,
    input_device: Annotated[str | None, typer.Option(help="Sound input (name or index).")] = None,
    output_device: Annotated[str | None, typer.Option(help="Sound output (name or index).")] = None,
    quiet: Annotated[
        bool, typer.Option(help="Show only transcripts, replies and problems.")
    ] = False,
    trusted_host: Annotated[bool, typer.Option(
        "--trusted-host", help="This host may hold the Redis password: reach a Redis on "
        "another machine without the gateway (VOXQUEUE_EDGE_DIRECT_REDIS).")] = False,
    json_lines: Annotated[bool, typer.Option(
        "--json", help="Print one JSON line per command on stdout: its status, transcript, "
        "reply and timings (speech end to first audio, endpoint wait, transcript).")] = False,
) -> None:
    """Listen for the wake word, send commands as turns, play the replies."""
    from pydantic import ValidationError

    from edge.device import Device
    from edge.display import Display
    from edge.player import Player, PlayerError, SpeakerOutput, WavDirOutput
    from edge.settings import EdgeSettings, direct_redis_problem
    from edge.sources import MicSource, SourceError, StdinSource, WavSource
    from voxqueue.settings import get_client_settings

    logging.basicConfig(
        level=logging.WARNING,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    from rich.console import Console

    # With --json, stdout holds only the JSON lines: the screen goes to stderr.
    err = Display(Console(stderr=json_lines, highlight=False, soft_wrap=True), quiet=quiet)
    if wav is not None and stdin:
        err.warn("choose --wav or --stdin, not both")
        raise typer.Exit(2)
    overrides: dict[str, Any] = {
        "wake_words": wake_word or None,
        "device": device,
        "session": session,
        "silence": silence,
        "vad": vad,
        "wake_engine": wake_engine,
        "max_seconds": max_seconds,
        "no_speech_s": no_speech_timeout,
        "follow_up_s": follow_up,
        "cooldown_s": cooldown,
        "deadline_s": deadline,
        "stream": stream,
        "end_early_s": end_early,
        "unfinished_wait_s": wait_unfinished,
        "earcons": earcons,
        "input_device": input_device,
        "output_device": output_device,
        "direct_redis": trusted_host or None,
    }
    try:
        edge = EdgeSettings(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as exc:
        for problem in exc.errors():
            err.warn(f"{'.'.join(str(p) for p in problem['loc'])}: {problem['msg']}")
        raise typer.Exit(2) from exc
    settings = get_client_settings()
    refusal = direct_redis_problem(settings.redis.url, settings.gateway.url, edge.direct_redis)
    if refusal is not None:
        err.warn(refusal)
        raise typer.Exit(2)
    try:
        if wav is not None:
            source: Any = WavSource(wav, realtime=realtime)
        elif stdin:
            source = StdinSource(realtime=realtime)
        else:
            source = MicSource(edge.input_device)
        output: Any = (
            WavDirOutput(audio_out) if audio_out is not None else SpeakerOutput(edge.output_device)
        )
    except (SourceError, PlayerError) as exc:
        err.warn(str(exc))
        raise typer.Exit(2) from exc
    dev = Device(
        edge,
        settings,
        source,
        Player(output, realtime=source.live),
        err,
        announcements=announcements,
        report=_print_json if json_lines else None,
    )

    def on_term(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    try:
        dev.run()
    except KeyboardInterrupt:
        err.info("stopped")
    except SourceError as exc:  # the microphone went away: let the supervisor restart us
        err.warn(str(exc))
        raise typer.Exit(1) from exc


def _print_json(record: Any) -> None:
    import json

    print(json.dumps({"turn_id": record.turn_id, "status": record.status,
                      "transcript": record.transcript, "reply": record.reply,
                      **(record.timings or {})}), flush=True)


def main(args: list[str] | None = None) -> None:
    """Run the command with ``args`` (default: the process's)."""
    app(args=args, prog_name="voxqueue edge")


if __name__ == "__main__":
    main()
