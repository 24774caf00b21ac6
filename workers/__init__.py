"""voxqueue's Celery workers: ``celery -A workers worker -Q stt`` runs the STT queue.

One sub-package per queue (``stt``, ``agent``, ``tools``, ``tts``, ``monitor``), each with its
task module and its providers; ``runtime`` holds what every stage shares.
"""

from workers.app import app

__all__ = ["app"]
