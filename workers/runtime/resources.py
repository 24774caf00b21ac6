"""Per-process resources, created once and shared by the worker's threads."""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar

import redis

from voxqueue.keys import Keys
from voxqueue.redis_conn import connect
from voxqueue.settings import Settings
from voxqueue.turns import TurnStore

if TYPE_CHECKING:
    from workers.agent.providers import ChatModel
    from workers.runtime.lease import LeaseKeeper
    from workers.stt.providers import Transcriber
    from workers.tools.registry import ToolRegistry
    from workers.tts.providers import Synthesizer

T = TypeVar("T")


class Runtime:
    """Settings, Redis, the turn store, providers and tools of one worker process.

    Providers and models are built on first use (a worker only builds what its queues need)
    and then reused by every task and thread of the process.
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.keys = Keys(settings.key_prefix)
        self._lock = threading.RLock()
        self._built: dict[str, Any] = {}
        #: Renews the leases of this worker's tasks (set when the worker is ready).
        self.lease: LeaseKeeper | None = None

    @cached_property
    def redis(self) -> redis.Redis:
        return connect(self.settings)

    @cached_property
    def store(self) -> TurnStore:
        return TurnStore(self.redis, self.keys, self.settings.turn_ttl_s,
                               self.settings.session_ttl_s)

    def script(self, source: str) -> Any:
        """A Lua script registered once per process (its SHA is computed once, not per call)."""
        return self._once(f"script:{source}", lambda: self.redis.register_script(source))

    def _once(self, name: str, build: Callable[[], T]) -> T:
        with self._lock:
            if name not in self._built:
                self._built[name] = build()
            return self._built[name]  # type: ignore[no-any-return,unused-ignore]

    @property
    def transcriber(self) -> Transcriber:
        from workers.stt.providers import select_transcriber

        return self._once("stt", lambda: select_transcriber(self.settings))

    @property
    def chat_model(self) -> ChatModel:
        from workers.agent.providers import select_chat_model

        return self._once("llm", lambda: select_chat_model(self.settings, self.tools))

    @property
    def synthesizer(self) -> Synthesizer:
        from workers.tts.providers import select_synthesizer

        return self._once("tts", lambda: select_synthesizer(self.settings))

    @property
    def tools(self) -> ToolRegistry:
        from workers.tools.registry import default_registry

        return self._once("tools", lambda: default_registry(self.settings))
