"""Which parts a worker process is made of: the providers its queues select and its tools.

The one place that knows every queue's providers; ``workers.app`` builds its Runtime here, and
so can a test or a script (``runtime_for(settings)``) without a Celery worker.
"""

from __future__ import annotations

import socket
from collections.abc import Callable

import structlog
from celery import Celery

from voxqueue.celery_config import make_celery
from voxqueue.settings import Settings
from workers.agent.context.tokens import encoding_for
from workers.agent.providers import select_chat_model
from workers.agent.providers.base import ChatModel
from workers.housekeeping.beat_scheduler import beat_config
from workers.runtime.resources import Builders, Runtime
from workers.stt.providers import select_transcriber
from workers.tool_registry import catalogue
from workers.tool_registry.assembly import assemble_tools
from workers.tool_registry.registry import Tool, ToolRegistry
from workers.tts.providers import select_synthesizer

log = structlog.get_logger("voxqueue.worker")


def tools_of(rt: Runtime) -> Callable[[], ToolRegistry]:
    """The tools worker (or a process that is no worker) assembles every source, MCP servers
    included, and a tools worker publishes what they offer; other workers assemble the rest
    and take the MCP servers' tools from that catalogue, starting no server."""
    settings = rt.settings
    if rt.queues is None or "tools" in rt.queues:
        def publish(listed: list[Tool]) -> None:
            if rt.queues is not None:
                catalogue.publish(rt.redis, rt.keys, listed, worker=socket.gethostname())

        registry = assemble_tools(settings, on_mcp_listed=publish)
        return lambda: registry
    view = catalogue.CatalogueView(
        rt.redis, rt.keys, lambda known: assemble_tools(settings, mcp=False, extra=known))
    return view.registry


def chat_model_of(rt: Runtime) -> ChatModel:
    """The LLM provider, with the tokenizer that measures its context loaded beforehand."""
    model = select_chat_model(rt.settings, rt.tools)
    try:
        encoding_for(rt.settings.providers.llm_model)  # its encoding takes a moment to load
    except Exception as exc:  # counted when first needed instead
        log.warning("tokenizer not ready", error=str(exc))
    return model


def celery_of(rt: Runtime) -> Celery:
    """A Celery app configured like the workers' (queues, beat's schedule in Redis), for a
    process that is not a worker: it can send tasks, inspect workers and edit beat's entries."""
    app = make_celery(rt.settings, "voxqueue-runtime")
    app.conf.update(beat_config(rt.settings))
    return app


BUILDERS = Builders(
    transcriber=lambda rt: select_transcriber(rt.settings, lambda: rt.tools),
    chat_model=chat_model_of,
    synthesizer=lambda rt: select_synthesizer(rt.settings),
    tools=tools_of,
    celery=celery_of,
)


def runtime_for(settings: Settings, celery: Celery | None = None) -> Runtime:
    """A Runtime with the providers and tools the settings select."""
    return Runtime(settings, BUILDERS, celery)
