"""The ``voxqueue`` command (:mod:`~voxqueue.cli.main`), one module per family of commands."""

from voxqueue.cli.main import app, main

__all__ = ["app", "main"]
