"""``voxqueue sessions``: list, show and clear sessions (chat histories)."""

from __future__ import annotations

import time
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from voxqueue.cli.options import JsonOpt
from voxqueue.settings import get_settings

out = Console()
err = Console(stderr=True)

sessions_app = typer.Typer(help="List, show and clear sessions (chat histories).",
                           invoke_without_command=True)


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
