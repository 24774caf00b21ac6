"""A worker process's context, built once and shared by its tasks and threads: settings, Redis,
the turn store, the Celery app to send with, and the providers its queues use.

Tasks get it from their own app (``workers.runtime.stage.begin``); tools from their call
(``workers.tool_registry.context.runtime``). What to build is wired in ``workers.wiring``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar

import redis

from voxqueue.keys import Keys
from voxqueue.redis_conn import DurableScript, connect
from voxqueue.settings import Settings
from voxqueue.turns import TurnStore
from workers.runtime.delayed_calls import Timers

if TYPE_CHECKING:
    from celery import Celery

    from workers.agent.providers.base import ChatModel
    from workers.runtime.lease import LeaseKeeper
    from workers.stt.providers.base import Transcriber
    from workers.tool_registry.registry import ToolRegistry
    from workers.tts.providers.base import Synthesizer

T = TypeVar("T")


@dataclass(frozen=True)
class Builders:
    """How a process builds each provider and its tools (each called once, on first use)."""

    transcriber: Callable[[Runtime], Transcriber]
    chat_model: Callable[[Runtime], ChatModel]
    synthesizer: Callable[[Runtime], Synthesizer]
    tools: Callable[[Runtime], Callable[[], ToolRegistry]]
    """Returns how to get the current tools (fixed, or refreshed from the catalogue)."""
    celery: Callable[[Runtime], Celery]
    """A Celery app on these settings, for a process that was given none (not a worker)."""


class Runtime:
    """Settings, Redis, the turn store, providers and tools of one worker process.

    Providers and models are built on first use (a worker only builds what its queues need)
    and then reused by every task and thread of the process.
    """

    def __init__(self, settings: Settings, builders: Builders,
                 celery: Celery | None = None) -> None:
        self.settings = settings
        self.keys = Keys(settings.redis.key_prefix)
        self._builders = builders
        self._celery = celery
        self._lock = threading.RLock()
        self._built: dict[str, Any] = {}
        #: The queues this process consumes (set when the worker starts; None: not a worker).
        self.queues: frozenset[str] | None = None
        #: Renews the leases of this worker's tasks (set when the worker is ready).
        self.lease: LeaseKeeper | None = None

    @cached_property
    def redis(self) -> redis.Redis:
        return connect(self.settings)

    @cached_property
    def store(self) -> TurnStore:
        return TurnStore(self.redis, self.keys, self.settings.turns.ttl_s,
                         self.settings.turns.session_ttl_s)

    @cached_property
    def celery(self) -> Celery:
        """The Celery app tasks are sent with (the worker's own; else one on these settings)."""
        return self._celery if self._celery is not None else self._builders.celery(self)

    @cached_property
    def timers(self) -> Timers:
        """The process's short timers, on one thread."""
        return Timers()

    def script(self, source: str) -> DurableScript:
        """A Lua script registered once per process (its SHA is computed once, not per call),
        whose writes are on the replicas before its result returns: every script here writes
        a turn's state that the stage then acts on (a piece's number before its job is sent)."""
        return self._once(f"script:{source}",
                          lambda: DurableScript(self.redis, source, "a turn's state"))

    def _once(self, name: str, build: Callable[[], T]) -> T:
        with self._lock:
            if name not in self._built:
                self._built[name] = build()
            return self._built[name]  # type: ignore[no-any-return,unused-ignore]

    @property
    def transcriber(self) -> Transcriber:
        return self._once("stt", lambda: self._builders.transcriber(self))

    @property
    def chat_model(self) -> ChatModel:
        return self._once("llm", lambda: self._builders.chat_model(self))

    @property
    def synthesizer(self) -> Synthesizer:
        return self._once("tts", lambda: self._builders.synthesizer(self))

    @property
    def tools(self) -> ToolRegistry:
        """The tools this process knows (the tools worker's, in full; see ``workers.wiring``)."""
        return self._once("tools", lambda: self._builders.tools(self))()
