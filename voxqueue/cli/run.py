"""``voxqueue worker``, ``up`` and ``demo``: running the system's processes on this machine."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from voxqueue.redis_conn import redact
from voxqueue.settings import QUEUES, get_settings
from voxqueue.up.embedded_redis import EMBEDDED_PORT, DataDirInUse, data_dir
from voxqueue.up.flower_auth import flower_credentials
from voxqueue.up.in_process import InProcess
from voxqueue.up.process_table import (
    DEFAULT_PROCESSES,
    PER_QUEUE,
    SHARED_WORKER,
    default_processes,
    parse_processes,
)
from voxqueue.up.running import RUNNING_FILE
from voxqueue.up.supervisor import Supervisor

out = Console()
err = Console(stderr=True)


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


def up(
    flower: Annotated[bool, typer.Option(help="Run the Flower dashboard.")] = True,
    beat: Annotated[bool, typer.Option(help="Run beat (the scheduled monitors).")] = True,
    processes: Annotated[str | None, typer.Option(
        help="A worker per queue, as compose and Kubernetes run them: 'tts=3,agent=2' (the "
             f"others one each), or '{PER_QUEUE}' ("
             f"{','.join(f'{q}={n}' for q, n in DEFAULT_PROCESSES.items())} with cloud "
             "providers; one for an offline model and for the other queues). Default: one "
             "worker process consuming every queue.")
    ] = None,
    redis_port: Annotated[int, typer.Option(
        help="Port of the embedded Redis, started when none answers at VOXQUEUE_REDIS_URL.")
    ] = EMBEDDED_PORT,
) -> None:
    """Run everything one machine needs: the workers, beat, Flower and the metrics exporter. A
    process that dies is started again (after 1 s, doubling to 30 s while it keeps dying);
    Ctrl-C stops all. With no Redis answering it starts one whose data stays in
    VOXQUEUE_DATA_DIR."""
    try:
        counts = (None if processes is None else default_processes(get_settings())
                  if processes.strip() == PER_QUEUE else parse_processes(processes))
    except ValueError as exc:
        err.print(f"[red]--processes: {exc}[/]")
        raise typer.Exit(2) from exc
    sup = Supervisor(get_settings())
    sup.running_file = data_dir(sup.settings) / RUNNING_FILE
    try:
        url, embedded = sup.ensure_redis(redis_port)
    except RuntimeError as exc:
        err.print(f"[red]{exc}[/]")
        raise typer.Exit(2) from exc
    if embedded:
        out.print(f"[yellow]No Redis answered at {redact(get_settings().redis.url)}: started "
                  f"an embedded Redis at {url}.[/]\nIts data: {data_dir(sup.settings)} "
                  f"(appendfsync {sup.settings.redis.appendfsync}; kept from one up to the next)",
                  soft_wrap=True)
    else:
        out.print(f"Using Redis at {sup.describe_redis()}")

    def on_signal(signum: int, frame: object) -> None:
        sup.stopping = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    threads = InProcess(sup.log)
    try:
        _start_machine(sup, threads, counts, beat=beat, flower=flower)
        sup.watch()
    finally:
        out.print("Stopping…")
        threads.stop()  # first: beat releases its lock while Redis is still up
        sup.stop_all()


def _start_machine(sup: Supervisor, threads: InProcess, counts: dict[str, int] | None, *,
                   beat: bool, flower: bool) -> None:
    """What ``up`` runs: the workers (one process for every queue, or with ``counts`` a worker
    per queue), Flower, and on threads of this process beat and the metrics exporter."""
    if counts is None:
        sup.start_shared_worker(inherit_output=True)
        out.print(f"Workers: one process ({SHARED_WORKER}) consuming every queue "
                  f"(--processes {PER_QUEUE} for a worker per queue)")
    else:
        sup.start_workers(processes=counts, inherit_output=True)
    if beat:
        threads.start_beat()
    port = sup.settings.dashboard.metrics_port
    try:
        threads.start_exporter(sup.settings, port)
        out.print(f"Metrics: http://127.0.0.1:{port}/metrics")
    except OSError as exc:  # the port is taken: up goes on without metrics
        err.print(f"[yellow]metrics exporter not started: port {port}: {exc}[/]")
    if flower:
        sup.start("flower", sup.flower_argv(), sup.flower_env(), inherit_output=True)
        creds = flower_credentials(sup.settings)
        where = ("from VOXQUEUE_FLOWER_PASSWORD" if creds.source == "VOXQUEUE_FLOWER_PASSWORD"
                 else f"in {creds.source}")
        out.print(f"Flower: http://127.0.0.1:{sup.settings.dashboard.flower_port} "
                  f"(user {creds.user}, password {where})")


def demo(
    wav: Annotated[Path | None, typer.Argument(help="A WAV question (default: a sample).")] =
        None,
    audio_out: Annotated[Path, typer.Option("--audio-out")] = Path("out/reply.wav"),
    mic: Annotated[bool, typer.Option("--mic", help="Ask through the microphone.")] = False,
) -> None:
    """Start everything on this machine, answer one spoken question, write the reply WAV."""
    from voxqueue.up.demo import record_question, run_demo

    question: Path | bytes | None = wav
    if mic:
        try:
            question = record_question(out)
        except (ImportError, RuntimeError) as exc:  # no PortAudio, no device, no speech
            err.print(f"[red]microphone: {exc}[/] (use a WAV file instead: voxqueue demo FILE)")
            raise typer.Exit(2) from exc
    try:
        result = run_demo(get_settings(), question, audio_out, out, log_dir=Path("out/logs"))
    except DataDirInUse as exc:  # a `voxqueue up` holds the data folder: ask through it
        err.print(f"[red]{exc}[/] (or ask the running system: voxqueue say FILE.wav)")
        raise typer.Exit(2) from exc
    if result.status != "ok":
        raise typer.Exit(1)
