"""Thread CPU of the parts of a task, measured inside the worker processes of a bench run.

Loaded into each worker by ``bench/hooks/sitecustomize.py`` when ``VQBENCH_SECTIONS`` names a
directory (``bench.sections`` sets it; nothing of this runs otherwise). Each function of
``SECTIONS`` is wrapped so that the CPU time of the calling thread (``time.thread_time``: its
own work and the kernel's for it, not its waits) is added to the section's total; an iterator's
section counts each step of it. Sections nest (the speaker runs inside the model's call), so a
row includes the rows indented under it. ``SIGRTMIN+1`` clears the totals, ``SIGRTMIN+2``
writes them to ``DIR/<pid>.json``: real-time signals, which Celery leaves alone.
"""

from __future__ import annotations

import functools
import gc
import importlib
import json
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

#: The interpreter's cyclic garbage collections, in whichever thread and section they ran.
GC_LABEL = "garbage collection (any thread; within the rows above too)"

#: (queue, label, module, attribute, kind): "call" times each call, "iter" each step of what
#: it returns, "gc" the collections (through ``gc.callbacks``). The label's leading spaces show
#: which row it is part of.
SECTIONS: tuple[tuple[str, str, str, str, str], ...] = (
    ("tts", "TTS task body", "workers.tts.task", "speak.run", "call"),
    ("tts", "  begin: turn, fence and flags (a round trip)",
     "workers.tts.task", "begin", "call"),
    ("tts", "  text for the ear", "workers.tts.task", "for_speech", "call"),
    ("tts", "  the voice's stream, read and cut into chunks",
     "workers.tts.task", "rechunk", "iter"),
    ("tts", "    of it, the SDK's reads (the request's opening too)",
     "workers.tts.providers.elevenlabs_tts", "ElevenLabsSynthesizer.stream", "iter"),
    ("tts", "      of it, the request's opening, until its first audio",
     "workers.tts.providers.elevenlabs_tts", "call_with_retry", "call"),
    ("tts", "  chunk writes (a script each)",
     "workers.runtime.stage", "Stage.emit_or_stop", "call"),
    ("tts", "  the sentence done (a script)",
     "workers.runtime.completion", "sentence_done", "call"),
    ("agent", "agent task body", "workers.agent.task", "step.run", "call"),
    ("agent", "  begin: turn, fence and flags (a round trip)",
     "workers.agent.task", "begin", "call"),
    ("agent", "  opening: session, history, alerts", "workers.agent.task", "open_turn", "call"),
    ("agent", "  the context counted", "workers.agent.loop", "measure_context", "call"),
    ("agent", "  the model's request and stream (the speaker too)",
     "workers.agent.providers.openai_chat", "OpenAIChat.complete", "call"),
    ("agent", "    of it, the SDK's request, until the stream's headers",
     "openai", "OpenAI.post", "call"),
    ("agent", "    the speaker, at each piece of text",
     "workers.agent.speech", "Speaker.on_text", "call"),
    ("agent", "      sentences cut for the ear", "workers.agent.speech", "Speaker._cut", "call"),
    ("agent", "      pieces handed to TTS", "workers.agent.speech", "Speaker._send_piece", "call"),
    ("agent", "        of it, Celery's publish", "workers.runtime.handoff", "send", "call"),
    ("agent", "        of it, the piece's number (a script)",
     "workers.runtime.completion", "allocate", "call"),
    ("agent", "  the reply's last pieces", "workers.agent.speech", "Speaker.finish", "call"),
    ("agent", "  the reply stored and the turn closed",
     "workers.agent.loop", "_final_reply", "call"),
    ("tts", GC_LABEL, "gc", "collect", "gc"),
    ("agent", GC_LABEL, "gc", "collect", "gc"),
)

RESET = signal.SIGRTMIN + 1
DUMP = signal.SIGRTMIN + 2

_lock = threading.Lock()
_totals: dict[str, list[float]] = {}  # label -> [CPU seconds, calls or steps]


def _add(label: str, cpu_s: float) -> None:
    with _lock:
        entry = _totals.setdefault(label, [0.0, 0.0])
        entry[0] += cpu_s
        entry[1] += 1


def timed(label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn``, its calls' thread CPU added to ``label``."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            _add(label, time.thread_time() - started)
    return wrapper


def timed_steps(label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn``, each step of the iterator it returns timed under ``label`` (its end too)."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Iterator[Any]:
        steps = iter(fn(*args, **kwargs))
        try:
            while True:
                started = time.thread_time()
                try:
                    item = next(steps)
                except StopIteration:
                    _add(label, time.thread_time() - started)
                    return
                _add(label, time.thread_time() - started)
                yield item
        finally:  # a reader that stops early closes what it read (a provider's response)
            close = getattr(steps, "close", None)
            if close is not None:
                close()
    return wrapper


def _time_collections() -> Callable[[str, dict[str, Any]], None]:
    """A ``gc.callbacks`` entry adding each collection's thread CPU to ``GC_LABEL``."""
    started = threading.local()

    def callback(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started.at = time.thread_time()
        elif hasattr(started, "at"):
            _add(GC_LABEL, time.thread_time() - started.at)
    return callback


def target(module: str, attribute: str) -> tuple[Any, str]:
    """The object holding ``attribute`` (``Class.method`` or a name) and the name in it."""
    owner: Any = importlib.import_module(module)
    *path, name = attribute.split(".")
    for part in path:
        owner = getattr(owner, part)
    getattr(owner, name)  # it must exist
    return owner, name


def totals() -> dict[str, list[float]]:
    with _lock:
        return {label: list(entry) for label, entry in _totals.items()}


def reset() -> None:
    with _lock:
        _totals.clear()


def install(out_dir: Path) -> None:
    """Wrap every section's function, and answer the reset and dump signals."""
    gc.callbacks.append(_time_collections())
    for _queue, label, module, attribute, kind in SECTIONS:
        if kind == "gc":
            continue
        owner, name = target(module, attribute)
        wrap = timed_steps if kind == "iter" else timed
        setattr(owner, name, wrap(label, getattr(owner, name)))

    def dump(*_: Any) -> None:
        (out_dir / f"{os.getpid()}.json").write_text(json.dumps(totals()))

    signal.signal(RESET, lambda *_: reset())
    signal.signal(DUMP, dump)
