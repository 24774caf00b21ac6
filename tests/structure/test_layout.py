"""The rules of the code's layout (ARCHITECTURE.md), checked on the import graph.

Measured when these rules were written: 3 import circles (of 3, 4 and 7 modules), 12 imports
of the Celery app inside 8 modules' functions, 23 imports from one queue's folder into another
(or from shared code into a queue's), 4 modules over 350 lines. Now: none of each.

The 350-line cap was dropped (#45): it cut concepts in two (34 modules under 50 lines, five
circles that closed only through `if TYPE_CHECKING:` imports). A module now holds one concept
whatever its length; circles count type-only imports, and 1,000 lines is a tripwire that asks
whether a module still holds one concept, not a budget.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.structure.import_graph import ROOT, Graph, build

#: Folders of workers/ that hold one queue's code (housekeeping: beat's own tasks).
QUEUE_FOLDERS = frozenset({"stt", "agent", "tools", "tts", "monitor", "housekeeping"})
#: Folders of workers/ that every queue may use; they use no queue's folder.
SHARED_FOLDERS = frozenset({"runtime", "tool_registry", "intents"})
#: Where the parts are put together: the only modules that may import every folder.
COMPOSITION = frozenset({"workers", "workers.app", "workers.wiring"})
#: voxqueue's command-line modules (``voxqueue.cli`` and its modules, ``voxqueue.cli_settings_doc``)
#: start workers and edges, so they may import them; so may these.
COMMANDS = frozenset({"voxqueue.up.demo", "voxqueue.up.in_process",
                      "voxqueue.observability.metrics"})
#: Past this a module is probably two concepts: split it by concept, never by a count.
TRIPWIRE_LINES = 1000


@pytest.fixture(scope="module")
def graph() -> Graph:
    return build()


def is_command(module: str) -> bool:
    return (module in COMMANDS or module == "voxqueue.cli"
            or module.startswith(("voxqueue.cli.", "voxqueue.cli_")))


def folder(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "workers" and len(parts) > 2 else None


def layer_problems(g: Graph) -> list[str]:
    """Every import that breaks a rule, as ``source:line -> target (rule)``."""
    found = []
    task_modules = {m for m, p in g.modules.items() if "@app.task" in p.read_text()}
    for imp in g.imports:
        if imp.type_only:
            continue  # layering is about what runs; circles (below) count these too
        where = f"{imp.source}:{imp.line} -> {imp.target}"
        ours = imp.target.split(".")[0] in ("voxqueue", "workers", "edge")
        if imp.target == "workers.app" and imp.source != "workers" and (
                imp.in_function or imp.source not in task_modules | COMPOSITION):
            # (the package itself imports it on first use: workers/__init__.py)
            found.append(f"{where} (only task modules import the Celery app, at the top)")
        if imp.source.startswith("edge") and imp.target.startswith("workers"):
            found.append(f"{where} (the edge never imports the workers)")
        if (imp.source.startswith("voxqueue") and imp.target.startswith(("workers", "edge"))
                and not is_command(imp.source)):
            found.append(f"{where} (the library imports no worker or edge code)")
        if ".providers" in imp.source and (imp.target.split(".")[0] == "celery" or
                                           imp.target.startswith("workers.runtime.stage")):
            found.append(f"{where} (providers never import Celery)")
        if not ours or imp.source in COMPOSITION:
            continue
        src, dst = folder(imp.source), folder(imp.target)
        if src == dst or dst is None:
            continue
        if src in QUEUE_FOLDERS and dst in QUEUE_FOLDERS:
            found.append(f"{where} (a queue's folder imports shared code, not another queue's)")
        if src in SHARED_FOLDERS and dst in QUEUE_FOLDERS:
            found.append(f"{where} (shared code imports no queue's folder)")
    return found


def test_no_import_circles(graph: Graph) -> None:
    assert graph.circles() == []


def test_every_import_keeps_the_layering(graph: Graph) -> None:
    assert layer_problems(graph) == []


def test_provider_protocols_live_in_their_own_modules(graph: Graph) -> None:
    misplaced = []
    for name, path in graph.modules.items():
        if ".providers" not in name or name.endswith(".base"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any(
                    ast.unparse(b).endswith("Protocol") for b in node.bases):
                misplaced.append(f"{name}.{node.name}")
    assert misplaced == []


def overgrown(g: Graph) -> dict[str, int]:
    """Modules past the tripwire, with their line counts."""
    return {name: n for name, path in g.modules.items()
            if (n := len(path.read_text().splitlines())) > TRIPWIRE_LINES}


def test_no_module_outgrows_one_concept(graph: Graph) -> None:
    assert overgrown(graph) == {}


def test_nothing_reaches_for_a_current_app(graph: Graph) -> None:
    found = [name for name, path in graph.modules.items()
             if "current_app" in path.read_text() or "shared_task" in path.read_text()]
    assert found == []


def _tree(tmp_path: Path, files: dict[str, str]) -> Graph:
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return build(tmp_path)


def test_the_rules_catch_what_they_forbid(tmp_path: Path) -> None:
    """The checks on a small tree that breaks each rule once."""
    g = _tree(tmp_path, {
        "voxqueue/__init__.py": "",
        "voxqueue/client/direct.py": "def f():\n    from workers.stt import task\n",
        "edge/__init__.py": "",
        "edge/mic.py": "import workers.runtime.stage\n",
        "workers/__init__.py": "",
        "workers/app.py": "",
        "workers/runtime/__init__.py": "",
        "workers/runtime/stage.py": "from workers.agent import loop\n",
        "workers/stt/__init__.py": "",
        "workers/stt/task.py": "from workers.app import app\n@app.task\ndef t(): ...\n",
        "workers/stt/providers/__init__.py": "",
        "workers/stt/providers/fast.py": "from celery import Celery\n",
        "workers/agent/__init__.py": "",
        "workers/agent/loop.py": "def go():\n    from workers.app import app\n"
                                 "    from workers.stt import task\n",
        "workers/agent/helper.py": "from workers.agent import circle\n",
        "workers/agent/circle.py": "def f():\n    from workers.agent import helper\n",
        "workers/tts/__init__.py": "",
        "workers/tts/speak.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                "    from workers.tts import say\n",
        "workers/tts/say.py": "from workers.tts import speak\n" + "x = 1\n" * 1000,
    })
    assert g.circles() == [["workers.agent.circle", "workers.agent.helper"],
                           ["workers.tts.say", "workers.tts.speak"]]
    assert overgrown(g) == {"workers.tts.say": 1001}
    problems = "\n".join(layer_problems(g))
    for expected in ("voxqueue.client.direct:2 -> workers.stt.task (the library",
                     "edge.mic:1 -> workers.runtime.stage (the edge never",
                     "workers.runtime.stage:1 -> workers.agent.loop (shared code",
                     "workers.stt.providers.fast:1 -> celery (providers never",
                     "workers.agent.loop:2 -> workers.app (only task modules",
                     "workers.agent.loop:3 -> workers.stt.task (a queue's folder"):
        assert expected in problems
    assert "workers.stt.task:1" not in problems  # a task module imports the app: allowed
    assert ROOT.is_dir()
