"""Loads ``bench.section_hooks`` into a worker process of ``bench.sections``' run.

On ``PYTHONPATH`` only for that run, with ``VQBENCH_SECTIONS`` naming the output directory: once
``workers.app`` is imported (the Celery app, before any task runs), the sections are wrapped.
Any other process of the run imports this and does nothing else.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any


class _AfterApp(importlib.abc.MetaPathFinder):
    """Finds ``workers.app`` as usual, and installs the sections once it has run."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "workers.app":
            return None
        sys.meta_path.remove(self)  # the real finders from here on
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        run = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            run(module)
            from bench import section_hooks

            section_hooks.install(Path(os.environ["VQBENCH_SECTIONS"]))

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


if os.environ.get("VQBENCH_SECTIONS"):
    sys.meta_path.insert(0, _AfterApp())
