"""The ``voxqueue`` command: ask, say, tools, edge, and the command families of the sibling
``cli_*`` modules registered on one app."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from voxqueue.cli.gateway import devices_app
from voxqueue.cli.gateway import gateway as gateway_command
from voxqueue.cli.gateway import wyoming as wyoming_command
from voxqueue.cli.observe import doctor, exporter, trace
from voxqueue.cli.options import JsonOpt
from voxqueue.cli.run import demo, up, worker
from voxqueue.cli.sessions import sessions_app
from voxqueue.client.direct import InputError, Turn, Unavailable
from voxqueue.client.gateway import connect_client
from voxqueue.contracts import TurnResult

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="voxqueue: a distributed voice agent on Celery and Redis.")
out = Console()
err = Console(stderr=True)

SessionOpt = Annotated[str | None, typer.Option("--session", help="Session id (history).")]
AudioOpt = Annotated[Path | None, typer.Option("--audio-out", help="Write the reply as WAV.")]
DeviceOpt = Annotated[str | None, typer.Option("--device", help="Device id (announcements).")]
TimeoutOpt = Annotated[float | None, typer.Option("--deadline", help="Turn deadline, seconds.")]


def _finish(turn: Turn, audio_out: Path | None, as_json: bool, show_events: bool) -> None:
    if show_events and not as_json:
        for entry in turn.events():
            ev = entry.event
            if ev.type == "tts-chunk":
                continue
            detail = {k: v for k, v in ev.data.items() if k in (
                "text", "name", "step", "code", "message", "status", "ms", "result", "error")}
            out.print(f"[dim]{ev.ts:.3f}[/] [bold]{ev.type:<10}[/] {detail}")
    result = turn.wait()
    if audio_out is not None and result.status in ("ok", "error"):
        pcm = turn.audio()
        if pcm:
            result.audio_path = str(turn.save_audio(audio_out))
    if as_json:
        print(result.model_dump_json())
    else:
        _print_result(result)
    if result.status != "ok":
        error = result.error or {"code": result.status, "message": f"turn {result.status}"}
        err.print(f"[red]error {error['code']}[/]: {error['message']}")
        raise typer.Exit(1)


def _print_result(result: TurnResult) -> None:
    if result.transcript is not None:
        out.print(f"[bold]You:[/] {result.transcript}")
    for call in result.tool_calls:
        outcome = call.result if call.error is None else f"[red]{call.error}[/]"
        out.print(f"  [cyan]tool[/] {call.name}({call.arguments}) -> {outcome} "
                  f"[dim]{call.ms:.0f} ms[/]")
    if result.reply is not None:
        out.print(f"[bold]Assistant:[/] {result.reply}")
    table = Table("stage", "ms", box=None, show_header=False)
    for stage, ms in result.timings.items():
        table.add_row(stage, f"{ms:.0f}")
    out.print(table)
    if result.audio_path:
        out.print(f"[dim]reply audio: {result.audio_path}[/]")


def _input_error(exc: InputError | Unavailable) -> None:
    err.print(f"[red]error {exc.code}[/]: {exc}")
    raise typer.Exit(2 if isinstance(exc, InputError) else 3)


def ask(text: str, session: SessionOpt = None, audio_out: AudioOpt = None,
        json: JsonOpt = False, device: DeviceOpt = None, deadline: TimeoutOpt = None,
        events: Annotated[bool, typer.Option(help="Show events as they arrive.")] = False,
        speak: Annotated[bool, typer.Option(help="Synthesize the reply.")] = True) -> None:
    """Ask a question in text; print the reply (through the gateway when one is set)."""
    with connect_client() as client:
        try:
            turn = client.ask(text, session=session, device=device, deadline_s=deadline,
                              speak=speak or audio_out is not None)
        except (InputError, Unavailable) as exc:
            _input_error(exc)
            return
        _finish(turn, audio_out, json, events)


def say(wav: Path, session: SessionOpt = None, audio_out: AudioOpt = None,
        json: JsonOpt = False, device: DeviceOpt = None, deadline: TimeoutOpt = None,
        events: Annotated[bool, typer.Option(help="Show events as they arrive.")] = False) -> None:
    """Send a spoken question (a WAV file); print the transcript and reply."""
    with connect_client() as client:
        try:
            turn = client.say(wav, session=session, device=device, deadline_s=deadline)
        except (InputError, Unavailable) as exc:
            _input_error(exc)
            return
        _finish(turn, audio_out, json, events)


def tools(json: JsonOpt = False) -> None:
    """List the tools the workers offer, with their schemas (built-ins, modules, plugins, MCP)."""
    from workers.tool_registry.listing import print_tools

    print_tools(json)


def edge(ctx: typer.Context) -> None:
    """Run the edge device: wake word, commands as turns, replies (voxqueue edge --help)."""
    from edge.cli import main as edge_main  # the audio stack loads only for this command

    edge_main(ctx.args)


def satellite(ctx: typer.Context) -> None:
    """Serve a Wyoming satellite (wyoming-satellite) as an edge (voxqueue satellite --help)."""
    from edge.satellite.command import main as satellite_main

    satellite_main(ctx.args)


# The commands, in the order ``voxqueue --help`` lists them (groups come after commands).
for command in (ask, say, worker, up, tools, trace, doctor, exporter, demo):
    app.command()(command)
app.command("gateway")(gateway_command)
app.command("wyoming")(wyoming_command)
app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
            add_help_option=False)(edge)
app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
            add_help_option=False)(satellite)
app.add_typer(devices_app, name="devices")
app.add_typer(sessions_app, name="sessions")


def _logs_to_stderr() -> None:
    """A command's standard output is its result (``--json`` must parse): every log line,
    ours (structlog's default writes to stdout) or a library's, goes to standard error. A
    worker configures its own logging when it starts (workers/runtime/lifecycle.py)."""
    import structlog

    from voxqueue.observability.redaction import redact_event

    structlog.configure(
        processors=[structlog.processors.add_log_level, redact_event,
                    structlog.processors.TimeStamper(fmt="iso", utc=True),
                    structlog.dev.ConsoleRenderer(colors=False)],
        logger_factory=structlog.PrintLoggerFactory(sys.stderr))


def main() -> None:
    _logs_to_stderr()
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
