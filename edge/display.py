"""What the device shows on its terminal: wake words, turns' stage events, replies, problems."""

from __future__ import annotations

import time

from rich.console import Console
from rich.markup import escape

from voxqueue.contracts import TurnEvent


def describe(event: TurnEvent) -> str | None:
    """One line of rich markup for a turn event; None for the audio chunks."""
    d = event.data
    t = event.type
    if t == "tts-chunk":
        return None
    if t == "stt-end":
        return f"[bold]You:[/] {escape(str(d.get('text', '')))}"
    if t == "reply":
        return f"[bold]Assistant:[/] {escape(str(d.get('text', '')))}"
    if t == "tool-start":
        return f"[cyan]tool[/] {escape(str(d.get('name')))} …"
    if t == "tool-end":
        ok = d.get("error") is None
        outcome = escape(str(d.get("result") if ok else d.get("error")))
        return (
            f"[cyan]tool[/] {escape(str(d.get('name')))}"
            f"({escape(str(d.get('arguments', '')))}) -> "
            f"{outcome if ok else f'[red]{outcome}[/]'} [dim]{d.get('ms', 0):.0f} ms[/]"
        )
    if t == "error":
        return f"[red]error {escape(str(d.get('code')))}[/]: {escape(str(d.get('message')))}"
    if t == "run-end":
        colour = "green" if d.get("status") == "ok" else "yellow"
        return f"[{colour}]run-end {d.get('status')}[/] [dim]{d.get('ms', 0):.0f} ms[/]"
    shown = {
        k: v
        for k, v in d.items()
        if k in ("seq", "step", "queue_ms", "ttfb_ms", "ms", "provider", "reason", "input")
    }
    return f"[dim]{t} {escape(str(shown)) if shown else ''}[/]"


class Display:
    """Lines on the terminal, each with the time of day; safe to call from any thread."""

    def __init__(self, console: Console | None = None, *, quiet: bool = False) -> None:
        self.console = console or Console(highlight=False, soft_wrap=True)
        self.quiet = quiet

    def line(self, markup: str) -> None:
        stamp = time.strftime("%H:%M:%S")
        self.console.print(f"[dim]{stamp}[/] {markup}")

    def info(self, text: str) -> None:
        if not self.quiet:
            self.line(escape(text))

    def warn(self, text: str) -> None:
        self.line(f"[yellow]{escape(text)}[/]")

    def turn_event(self, turn_id: str, event: TurnEvent) -> None:
        text = describe(event)
        if text is not None and (not self.quiet or event.type in ("stt-end", "reply", "error")):
            self.line(f"[dim]{turn_id[:8]}[/] {text}")
