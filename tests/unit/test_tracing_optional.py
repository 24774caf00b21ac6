"""Tracing is optional: off by default, and nothing breaks without OpenTelemetry installed."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from tests.conftest import ROOT

#: Imports the client, the Celery app and every task module, then reports what it saw.
PROBE = """
import json, logging, sys
{prelude}
import voxqueue.client.direct
import workers.app
from workers.app import app
app.loader.import_default_modules()
from celery.signals import task_prerun
from voxqueue.observability import otel
from voxqueue.settings import ObservabilitySettings, Settings, ignore_dotenv
import workers.runtime.task_spans as worker_tracing

logging.basicConfig(level=logging.WARNING)
ignore_dotenv()
off = Settings(observability=ObservabilitySettings(otel_enabled=False))
on = Settings(observability=ObservabilitySettings(otel_enabled=True, otel_exporter="console"))
with otel.turn_root(off, "ab" * 16, "voxqueue.agent.step") as off_headers:
    pass
modules = sorted(m for m in sys.modules if m.startswith("opentelemetry"))
hooked = any(r is worker_tracing._on_prerun for _, r in task_prerun.receivers)
with otel.turn_root(on, "ab" * 16, "voxqueue.agent.step") as on_headers:
    pass
print(json.dumps({{
    "modules": modules,
    "off_headers": off_headers,
    "on_headers": on_headers,
    "inject": otel.inject(),
    "hooked": hooked,
    "installed": worker_tracing.install(lambda: "agent"),
    "task_span": otel.start_task_span(on, "agent", "x", None, "ab" * 16, {{}}) is None,
}}))
"""

BLOCK = """
import importlib.abc
class _NoOpenTelemetry(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, _NoOpenTelemetry())
"""


def probe(prelude: str = "", enabled: str = "false") -> tuple[dict, str]:
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "VOXQUEUE_OTEL_ENABLED": enabled}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(PROBE.format(prelude=prelude))],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1]), done.stderr


def test_without_opentelemetry_installed_everything_imports_and_nothing_is_traced():
    seen, stderr = probe(BLOCK)
    assert seen["modules"] == []
    assert seen["off_headers"] == {} and seen["on_headers"] == {} and seen["inject"] == {}
    assert not seen["hooked"] and not seen["installed"]
    assert seen["task_span"] is True
    # Turned on without the packages: one clear warning, and turns go on untraced.
    assert stderr.count("OpenTelemetry is not installed") == 1
    assert "voxqueue[otel]" in stderr


def test_off_by_default_the_tracing_sdk_is_never_imported():
    seen, _ = probe()
    # redis-py imports the OpenTelemetry API (for its own metrics) whenever it is installed;
    # what tracing would load is the SDK's tracer, the W3C propagator and the exporters.
    loaded = set(seen["modules"])
    for module in (
        "opentelemetry.sdk.trace",
        "opentelemetry.trace.propagation.tracecontext",
        "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    ):
        assert module not in loaded, module
    assert seen["off_headers"] == {} and seen["inject"] == {}
    assert not seen["hooked"] and not seen["installed"]


def test_turned_on_the_workers_hook_their_task_spans():
    seen, _ = probe(enabled="true")
    assert seen["hooked"] and seen["installed"]
    assert seen["on_headers"]["traceparent"].startswith("00-" + "ab" * 16 + "-")
