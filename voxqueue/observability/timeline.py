"""A turn's timeline from its events: spans for queue waits, providers and tools, drawn as a
waterfall in the terminal or as an SVG/HTML picture."""

from __future__ import annotations

import html
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from voxqueue.contracts import TurnSpec
from voxqueue.turns import StreamEntry

_QUEUE_OF = {"stt-start": "stt", "agent-step": "agent", "tool-start": "tools",
             "tts-start": "tts"}
COLOURS = {"queue": "#b0b7c3", "stt": "#4e79a7", "llm": "#f28e2b", "tool": "#59a14f",
           "tts": "#e15759", "turn": "#76b7b2"}


@dataclass(frozen=True)
class Span:
    label: str
    kind: str
    start_ms: float
    end_ms: float
    note: str = ""

    @property
    def ms(self) -> float:
        return self.end_ms - self.start_ms


def spans(spec: TurnSpec, entries: Iterable[StreamEntry]) -> list[Span]:
    """The turn's spans, in milliseconds from the end of speech (the turn's creation)."""
    t0 = spec.created_at
    out: list[Span] = []
    open_: dict[str, tuple[float, str]] = {}

    def at(ts: float) -> float:
        return round((ts - t0) * 1000, 1)

    for entry in entries:
        ev, d = entry.event, entry.event.data
        queue = _QUEUE_OF.get(ev.type)
        if queue and d.get("queue_ms"):
            end = at(float(d.get("started_at") or ev.ts))
            out.append(Span(f"queue → {queue}", "queue", end - float(d["queue_ms"]), end))
        if ev.type == "stt-start":
            open_["stt"] = (at(ev.ts), str(d.get("provider", "")))
        elif ev.type == "stt-end" and "stt" in open_:
            start, provider = open_.pop("stt")
            out.append(Span(f"stt {provider}", "stt", start, at(ev.ts),
                            f"“{str(d.get('text', ''))[:40]}”"))
        elif ev.type == "llm-start":
            open_[f"llm{d.get('step')}"] = (at(ev.ts), str(d.get("provider", "")))
        elif ev.type == "llm-end" and f"llm{d.get('step')}" in open_:
            start, provider = open_.pop(f"llm{d.get('step')}")
            calls = len(d.get("tool_calls") or [])
            ttfb = d.get("ttfb_ms")
            note = (f"ttfb {float(ttfb):.0f} ms" if ttfb is not None else "") + (
                f", {calls} tool call{'s' if calls != 1 else ''}" if calls else "")
            out.append(Span(f"llm step {d.get('step')} {provider}", "llm", start, at(ev.ts),
                            note))
        elif ev.type == "tool-end" and d.get("started_at"):
            start = at(float(d["started_at"]))
            out.append(Span(f"tool {d.get('name')}", "tool", start, start + float(d["ms"]),
                            "ok" if d.get("ok") else str(d.get("error_code") or "error")))
        elif ev.type == "tts-start":  # written with the first audio; the work began earlier
            open_[f"tts{d.get('seq')}"] = (at(float(d.get("started_at") or ev.ts)), "")
        elif ev.type == "tts-end" and f"tts{d.get('seq')}" in open_:
            start, _ = open_.pop(f"tts{d.get('seq')}")
            ttfb = d.get("ttfb_ms")
            out.append(Span(f"tts sentence {d.get('seq')}", "tts", start, at(ev.ts),
                            f"ttfb {float(ttfb):.0f} ms" if ttfb is not None else ""))
        elif ev.type == "run-end":
            out.insert(0, Span("turn", "turn", 0.0, at(ev.ts), str(d.get("status", ""))))
    return sorted(out, key=lambda s: (s.kind != "turn", s.start_ms))


def print_waterfall(all_spans: list[Span], console: Console, width: int = 48) -> None:
    total = max((s.end_ms for s in all_spans), default=1.0) or 1.0
    table = Table("span", "start ms", "ms", "timeline", "note", box=None)
    for s in all_spans:
        left = int(width * max(0.0, s.start_ms) / total)
        size = max(1, int(width * s.ms / total))
        bar = " " * left + "█" * min(size, width - left)
        colour = COLOURS.get(s.kind, "white")
        table.add_row(s.label, f"{s.start_ms:.0f}", f"{s.ms:.0f}",
                      f"[{colour}]{bar}[/]", s.note)
    console.print(table)


def svg(all_spans: list[Span], title: str, width: int = 900) -> str:
    """The waterfall as a standalone SVG picture."""
    row, label_w, pad = 22, 230, 10
    total = max((s.end_ms for s in all_spans), default=1.0) or 1.0
    plot_w = width - label_w - 2 * pad
    height = pad * 2 + 30 + row * len(all_spans) + 20
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'font-family="sans-serif" font-size="12">',
             f'<rect width="{width}" height="{height}" fill="white"/>',
             f'<text x="{pad}" y="{pad + 14}" font-size="15" font-weight="bold">'
             f'{html.escape(title)}</text>']
    for i, s in enumerate(all_spans):
        y = pad + 30 + i * row
        x = label_w + pad + plot_w * max(0.0, s.start_ms) / total
        w = max(1.5, plot_w * s.ms / total)
        parts.append(f'<text x="{pad}" y="{y + 14}">{html.escape(s.label)}</text>')
        parts.append(f'<rect x="{x:.1f}" y="{y + 3}" width="{w:.1f}" height="{row - 6}" '
                     f'fill="{COLOURS.get(s.kind, "#999")}"><title>{html.escape(s.label)}: '
                     f'{s.ms:.0f} ms {html.escape(s.note)}</title></rect>')
        parts.append(f'<text x="{min(x + w + 4, width - 60):.1f}" y="{y + 14}" fill="#333">'
                     f'{s.ms:.0f} ms</text>')
    for frac in (0.0, 0.25, 0.5, 0.75, 1.0):
        x = label_w + pad + plot_w * frac
        y = height - pad
        parts.append(f'<text x="{x:.1f}" y="{y}" fill="#666" text-anchor="middle">'
                     f'{total * frac:.0f} ms</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def write_picture(all_spans: list[Span], title: str, path: Path) -> Path:
    picture = svg(all_spans, title)
    if path.suffix.lower() in (".html", ".htm"):
        picture = (f"<!doctype html><meta charset='utf-8'><title>{html.escape(title)}</title>"
                   f"<body>{picture}</body>")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(picture, encoding="utf-8")
    return path
