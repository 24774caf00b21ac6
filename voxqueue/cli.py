"""The ``voxqueue`` command: ask, say, worker, up."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from voxqueue.cli_gateway import devices_app
from voxqueue.cli_gateway import gateway as gateway_command
from voxqueue.client import Client, InputError, Turn, Unavailable
from voxqueue.connect import connect_client
from voxqueue.contracts import TurnResult
from voxqueue.redis_conn import redact
from voxqueue.settings import QUEUES, get_settings
from voxqueue.supervisor import DEFAULT_PROCESSES, Supervisor

if TYPE_CHECKING:
    from voxqueue.doctor import KeyReport

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="voxqueue: a distributed voice agent on Celery and Redis.")
out = Console()
err = Console(stderr=True)

SessionOpt = Annotated[str | None, typer.Option("--session", help="Session id (history).")]
AudioOpt = Annotated[Path | None, typer.Option("--audio-out", help="Write the reply as WAV.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]
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


@app.command()
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


@app.command()
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


@app.command()
def worker(
    queues: Annotated[str, typer.Option(help="Comma-separated queues.")] = ",".join(QUEUES),
    pool: Annotated[str, typer.Option(help="threads (I/O-bound) or prefork (CPU-bound).")] =
        "threads",
    concurrency: Annotated[int, typer.Option("-c", "--concurrency")] = 8,
    name: Annotated[str | None, typer.Option(help="Worker name (default: the queues).")] = None,
) -> None:
    """Run a worker for the chosen queues (in the foreground)."""
    chosen = [q.strip() for q in queues.split(",") if q.strip()]
    sup = Supervisor(get_settings())
    try:
        argv = sup.worker_argv(chosen, name=name or "-".join(chosen), pool=pool,
                               concurrency=concurrency)
    except ValueError as exc:
        err.print(f"[red]{exc}[/]")
        raise typer.Exit(2) from exc
    os.execv(argv[0], argv)  # noqa: S606 (replace this process with the worker)


@app.command()
def up(
    flower: Annotated[bool, typer.Option(help="Run the Flower dashboard.")] = True,
    beat: Annotated[bool, typer.Option(help="Run beat (monitors, deadline sweeper).")] = True,
    processes: Annotated[str | None, typer.Option(
        help="Worker processes per queue, e.g. 'tts=3,agent=2' (default: "
             f"{','.join(f'{q}={n}' for q, n in DEFAULT_PROCESSES.items())} with cloud "
             "providers; one for an offline model and for the other queues).")
    ] = None,
) -> None:
    """Run everything one machine needs: workers per queue, beat and Flower. A process that
    dies is started again (after 1 s, doubling to 30 s while it keeps dying); Ctrl-C stops all."""
    from voxqueue.supervisor import default_processes, parse_processes

    try:
        counts = (default_processes(get_settings()) if processes is None
                  else parse_processes(processes))
    except ValueError as exc:
        err.print(f"[red]--processes: {exc}[/]")
        raise typer.Exit(2) from exc
    sup = Supervisor(get_settings())
    url, embedded = sup.ensure_redis()
    if embedded:
        out.print(f"[yellow]No Redis answered at {redact(get_settings().redis_url)}: started "
                  f"an embedded Redis at {url}.[/]")
    else:
        out.print(f"Using Redis at {sup.describe_redis()}")

    def on_signal(signum: int, frame: object) -> None:
        sup.stopping = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        _start_machine(sup, counts, beat=beat, flower=flower)
        sup.watch()
    finally:
        out.print("Stopping…")
        sup.stop_all()


def _start_machine(sup: Supervisor, counts: dict[str, int], *, beat: bool,
                   flower: bool) -> None:
    """What ``up`` runs: the workers, beat, the metrics exporter and Flower."""
    sup.start_workers(processes=counts, inherit_output=True)
    if beat:
        sup.start("beat", sup.beat_argv(), inherit_output=True)
    sup.start("exporter", [sys.executable, "-m", "voxqueue.cli", "exporter"],
              inherit_output=True)
    if flower:
        from voxqueue.supervisor import flower_credentials

        sup.start("flower", sup.flower_argv(), sup.flower_env(), inherit_output=True)
        creds = flower_credentials(sup.settings)
        where = ("from VOXQUEUE_FLOWER_PASSWORD" if creds.source == "VOXQUEUE_FLOWER_PASSWORD"
                 else f"in {creds.source}")
        out.print(f"Flower: http://127.0.0.1:{sup.settings.flower_port} "
                  f"(user {creds.user}, password {where})")


@app.command()
def tools(json: JsonOpt = False) -> None:
    """List the tools the workers offer, with their schemas (built-ins, modules, plugins, MCP)."""
    from workers.tools.listing import print_tools

    print_tools(json)


@app.command()
def trace(turn_id: str,
          out_file: Annotated[Path | None, typer.Option("--out", help="Write an .svg or "
                                                        ".html picture of the waterfall.")] = None,
          ) -> None:
    """Show a turn's timeline as a waterfall: queue waits, providers, tools, speech."""
    from voxqueue.timeline import print_waterfall, spans, write_picture
    from voxqueue.turns import TurnNotFound

    with Client() as client:
        try:
            spec = client.store.spec(turn_id)
        except TurnNotFound as exc:
            err.print(f"[red]{exc}[/]")
            raise typer.Exit(1) from exc
        found = spans(spec, client.store.history(turn_id))
    out.print(f"turn {turn_id} (session {spec.session_id})")
    print_waterfall(found, out)
    if out_file is not None:
        out.print(f"written: {write_picture(found, f'voxqueue turn {turn_id}', out_file)}")


@app.command()
def doctor() -> None:
    """Check Redis, the workers of every queue, beat, Flower, providers and keys."""
    from voxqueue.doctor import diagnose

    found = diagnose(get_settings())
    checks = found.checks
    table = Table("check", "", "detail", "fix", box=None)
    for c in checks:
        mark = "[green]ok[/]" if c.ok else ("[yellow]warn[/]" if c.warning else "[red]FAIL[/]")
        table.add_row(c.name, mark, c.detail, c.fix)
    out.print(table)
    if found.keys is not None and found.keys.families:
        out.print(_key_table(found.keys))
    failed = [c for c in checks if not c.ok and not c.warning]
    if failed:
        err.print(f"[red]{len(failed)} problem(s)[/]")
        raise typer.Exit(1)


def _key_table(report: KeyReport, rows: int = 30) -> Table:
    """Memory per key family, largest first; a family whose keys must expire but do not is
    marked."""
    from voxqueue.doctor import human_bytes

    table = Table("key family", "keys", "memory", "no TTL", box=None,
                  title="Redis memory per key family" + (
                      f" (first {report.scanned} keys)" if report.capped else ""))
    for f in report.families[:rows]:
        leak = f.must_expire and f.no_ttl > 0
        table.add_row(escape(f.name), str(f.count), human_bytes(f.bytes),
                      f"[yellow]{f.no_ttl} (should expire)[/]" if leak else str(f.no_ttl))
    if len(report.families) > rows:
        table.add_row(f"… {len(report.families) - rows} more families", "", "", "")
    return table


@app.command()
def exporter(port: Annotated[int | None, typer.Option(help="HTTP port for /metrics.")] = None,
             address: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
             ) -> None:
    """Serve Prometheus metrics computed from the turns' events (one per deployment)."""
    from voxqueue.metrics import Exporter

    settings = get_settings()
    exp = Exporter(settings)
    exp.serve(port or settings.metrics_port, address)
    out.print(f"Metrics on http://{address}:{port or settings.metrics_port}/metrics")
    try:
        exp.run()
    except KeyboardInterrupt:
        exp.stop()


@app.command()
def demo(
    wav: Annotated[Path | None, typer.Argument(help="A WAV question (default: a sample).")] =
        None,
    audio_out: Annotated[Path, typer.Option("--audio-out")] = Path("out/reply.wav"),
    mic: Annotated[bool, typer.Option("--mic", help="Ask through the microphone.")] = False,
) -> None:
    """Start everything on this machine, answer one spoken question, write the reply WAV."""
    from voxqueue.demo import record_question, run_demo

    question: Path | bytes | None = wav
    if mic:
        try:
            question = record_question(out)
        except (ImportError, RuntimeError) as exc:  # no PortAudio, no device, no speech
            err.print(f"[red]microphone: {exc}[/] (use a WAV file instead: voxqueue demo FILE)")
            raise typer.Exit(2) from exc
    result = run_demo(get_settings(), question, audio_out, out, log_dir=Path("out/logs"))
    if result.status != "ok":
        raise typer.Exit(1)


app.add_typer(devices_app, name="devices")
app.command("gateway")(gateway_command)

sessions_app = typer.Typer(help="List, show and clear sessions (chat histories).",
                           invoke_without_command=True)
app.add_typer(sessions_app, name="sessions")


@sessions_app.callback()
def sessions_list(ctx: typer.Context, json: JsonOpt = False) -> None:
    """List live sessions, most recently used first (expired ones are forgotten)."""
    import json as jsonlib

    from voxqueue.sessions import Sessions

    if ctx.invoked_subcommand is not None:
        return
    found = Sessions.from_settings(get_settings()).all()
    if json:
        print(jsonlib.dumps([s.as_dict() for s in found]))
        return
    if not found:
        out.print("No sessions.")
        return
    table = Table("session", "last used", "messages", "expires in", "tokens", "summaries")
    for s in found:
        table.add_row(s.session_id, f"{time.time() - s.last_used:.0f} s ago", str(s.messages),
                      "-" if s.expires_in_s is None else f"{s.expires_in_s} s",
                      "-" if s.tokens is None else str(s.tokens), str(s.summaries + s.trims))
    out.print(table)


@sessions_app.command("show")
def sessions_show(session_id: str) -> None:
    """Print a session's history as JSON."""
    import json as jsonlib

    from voxqueue.sessions import Sessions

    history = Sessions.from_settings(get_settings()).history(session_id)
    if history is None:
        err.print(f"[red]no session {session_id!r}[/] (unknown or expired)")
        raise typer.Exit(1)
    print(jsonlib.dumps(history, indent=2, ensure_ascii=False))


@sessions_app.command("clear")
def sessions_clear(
    session_id: Annotated[str | None, typer.Argument(help="The session to clear.")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Clear every session.")] = False,
) -> None:
    """Delete a session's history (or every session's, with --all)."""
    from voxqueue.sessions import Sessions

    if all_:
        out.print(f"Cleared {Sessions.from_settings(get_settings()).clear_all()} sessions.")
        return
    if session_id is None:
        err.print("[red]name a session, or pass --all[/]")
        raise typer.Exit(2)
    if not Sessions.from_settings(get_settings()).clear(session_id):
        err.print(f"[red]no session {session_id!r}[/]")
        raise typer.Exit(1)
    out.print(f"Cleared session {session_id}.")


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
             add_help_option=False)
def edge(ctx: typer.Context) -> None:
    """Run the edge device: wake word, commands as turns, replies (voxqueue edge --help)."""
    from edge.cli import main as edge_main  # the audio stack loads only for this command

    edge_main(ctx.args)


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
