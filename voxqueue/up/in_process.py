"""What ``voxqueue up`` runs on threads of its own process rather than in processes of their
own: beat and the metrics exporter. Neither runs a task; each would hold an interpreter of ~70 MB
to do a few Redis calls a minute. Each is started again after it stops (Redis away, a beat that
lost its lock), as a child process would be.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from voxqueue.settings import Settings
from voxqueue.up.process_table import BEAT_SCHEDULER

#: Seconds before a service that stopped is started again.
RESTART_S = 5.0


@dataclass
class InProcess:
    """The services on threads of this process; ``stop`` ends them."""

    log: Callable[[str], None]
    stopping: threading.Event = field(default_factory=threading.Event)
    threads: list[threading.Thread] = field(default_factory=list)
    beat: Any = None
    """The running beat ``Service`` (None while none runs)."""
    exporter: Any = None

    def keep_running(self, name: str, run: Callable[[], None]) -> threading.Thread:
        """``run`` on a daemon thread, called again ``RESTART_S`` after each return or error."""

        def loop() -> None:
            while not self.stopping.is_set():
                try:
                    run()
                except Exception as exc:
                    self.log(f"{name}: {type(exc).__name__}: {exc}")
                if not self.stopping.wait(RESTART_S):
                    self.log(f"{name} started again")

        thread = threading.Thread(target=loop, name=name, daemon=True)
        thread.start()
        self.threads.append(thread)
        return thread

    def start_beat(self) -> None:
        """celery beat with redbeat (its schedule and lock in Redis: one beat at a time
        across machines), on the Celery app of ``workers.control_app``."""
        from celery.beat import Service

        from workers.control_app import app

        def run() -> None:
            self.beat = Service(app, scheduler_cls=BEAT_SCHEDULER)
            try:
                self.beat.start()  # until stopped, or it loses its lock (SystemExit, caught)
            finally:
                self.beat = None

        self.keep_running("beat", run)

    def start_exporter(self, settings: Settings, port: int) -> None:
        """The Prometheus exporter (``voxqueue exporter``) on ``port``; OSError when the port
        is taken."""
        from voxqueue.observability.metrics import Exporter

        self.exporter = Exporter(settings)
        self.exporter.serve(port)
        self.keep_running("exporter", self.exporter.run)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop both; beat releases its lock (waited for up to ``timeout``: it may be asleep
        between ticks), so that the next beat takes it at once."""
        self.stopping.set()
        if self.exporter is not None:
            self.exporter.stop()
        beat = self.beat
        if beat is not None:
            beat.stop()
        for thread in self.threads:
            thread.join(timeout if thread.name == "beat" else 0.5)
