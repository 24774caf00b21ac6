"""``voxqueue trace``, ``doctor`` and ``exporter``: a turn's timeline, the health of the system,
and its Prometheus metrics."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from voxqueue.client.direct import Client
from voxqueue.settings import get_settings

if TYPE_CHECKING:
    from voxqueue.observability.doctor import KeyReport
    from voxqueue.up.running import UpProcesses

out = Console()
err = Console(stderr=True)


def trace(turn_id: str,
          out_file: Annotated[Path | None, typer.Option("--out", help="Write an .svg or "
                                                        ".html picture of the waterfall.")] = None,
          ) -> None:
    """Show a turn's timeline as a waterfall: queue waits, providers, tools, speech."""
    from voxqueue.observability.timeline import print_waterfall, spans, write_picture
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


def doctor() -> None:
    """Check Redis, the workers of every queue, beat, Flower, providers and keys."""
    from voxqueue.observability.doctor import diagnose, durability_checks

    found = diagnose(get_settings())
    checks = found.checks + durability_checks(get_settings())
    table = Table("check", "", "detail", "fix", box=None)
    for c in checks:
        mark = "[green]ok[/]" if c.ok else ("[yellow]warn[/]" if c.warning else "[red]FAIL[/]")
        table.add_row(escape(c.name), mark, escape(c.detail), escape(c.fix))  # (text, not markup)
    out.print(table)
    if found.up is not None and found.up.processes:
        out.print(process_table(found.up))
    if found.keys is not None and found.keys.families:
        out.print(_key_table(found.keys))
    failed = [c for c in checks if not c.ok and not c.warning]
    if failed:
        err.print(f"[red]{len(failed)} problem(s)[/]")
        raise typer.Exit(1)


def process_table(up: UpProcesses) -> Table:
    """The memory of each process of a running ``voxqueue up``, and of all of them."""
    from voxqueue.observability.doctor import human_bytes

    def cells(memory: object) -> tuple[str, str, str]:
        rss, pss, uss = (getattr(memory, k) for k in ("rss", "pss", "uss"))
        return (human_bytes(rss), "?" if pss is None else human_bytes(pss),
                "?" if uss is None else human_bytes(uss))

    table = Table("process", "pid", "resident (RSS)", "PSS", "own (USS)", box=None,
                  title="Memory of voxqueue up's processes (PSS: shared pages divided among "
                        "the processes sharing them)")
    for p in up.processes:
        table.add_row(escape(p.name), str(p.pid), *cells(p.memory))
    table.add_row(f"all {len(up.processes)}", "", *cells(up.total()))
    return table


def _key_table(report: KeyReport, rows: int = 30) -> Table:
    """Memory per key family, largest first; a family whose keys must expire but do not is
    marked."""
    from voxqueue.observability.doctor import human_bytes

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


def exporter(port: Annotated[int | None, typer.Option(help="HTTP port for /metrics.")] = None,
             address: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
             ) -> None:
    """Serve Prometheus metrics computed from the turns' events (one per deployment)."""
    from voxqueue.observability.metrics import Exporter

    settings = get_settings()
    exp = Exporter(settings)
    exp.serve(port or settings.dashboard.metrics_port, address)
    out.print(f"Metrics on http://{address}:{port or settings.dashboard.metrics_port}/metrics")
    try:
        exp.run()
    except KeyboardInterrupt:
        exp.stop()
