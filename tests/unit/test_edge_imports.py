"""The device installs and imports only what it needs: no worker code, no provider SDK."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import ROOT

FORBIDDEN = (
    "workers",
    "openai",
    "elevenlabs",
    "piper",
    "pocketsphinx",
    "onnxruntime",
    "hassil",
    "tests",
)

IMPORT_ALL = """
import importlib, json, pkgutil, sys
import edge
names = [m.name for m in pkgutil.iter_modules(edge.__path__) if m.name != "__main__"]
for name in names:
    importlib.import_module(f"edge.{name}")
from edge.device import Device  # the whole device, as `voxqueue edge` builds it
print(json.dumps({"modules": names, "loaded": sorted({m.split(".")[0] for m in sys.modules})}))
"""


def run(code: str) -> dict[str, list[str]]:
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_edge_never_imports_workers_or_provider_sdks():
    got = run(IMPORT_ALL)
    assert {"device", "wake", "vad", "capture", "player", "cli"} <= set(got["modules"])
    assert "pymicro_wakeword" in got["loaded"]  # the check can fail: the stack was imported
    assert not set(FORBIDDEN) & set(got["loaded"]), set(FORBIDDEN) & set(got["loaded"])


def test_the_voxqueue_command_loads_the_edge_only_when_it_runs():
    got = run(
        "import json, sys, voxqueue.cli, edge.cli\n"
        "print(json.dumps({'modules': [], 'loaded': sorted(sys.modules)}))"
    )
    assert "edge.device" not in got["loaded"] and "pymicro_wakeword" not in got["loaded"]
