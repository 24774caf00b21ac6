"""voxqueue's Celery workers: ``celery -A workers worker -Q stt`` runs the STT queue.

One sub-package per queue (``stt``, ``agent``, ``tools``, ``tts``, ``monitor``), each with its
task module and its providers; ``runtime`` holds what every stage shares.

The app (``workers.app``) is imported on first use (PEP 562): a process that imports a part of
this package without running tasks (beat's scheduler, the exporter's tool names) does not load
every task module and provider with it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from workers.app import VoxCelery

    app: VoxCelery


def __getattr__(name: str) -> Any:
    if name != "app":
        raise AttributeError(f"module 'workers' has no attribute {name!r}")
    from workers.app import app as celery_app

    globals()["app"] = celery_app  # (the import just bound ``app`` to the submodule)
    return celery_app


__all__ = ["app"]
