"""bench/ and tests/ share ``testkit`` and never import each other; ``./vq bench`` lists every
bench, and bench/README.md's index has a row for each."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.structure.import_graph import ROOT

#: Who may not depend on whom: bench and tests on each other, testkit (beneath both) on either.
FORBIDDEN = {"bench": {"tests"}, "tests": {"bench"}, "testkit": {"tests", "bench"}}
MODULE_PATH = re.compile(r"(tests|bench)(\.\w+)+")


def crossings(root: Path = ROOT) -> list[str]:
    """Every import (or dotted module path in a string, as for ``-m`` or a tool module) from
    one of the three folders into a folder it may not use, as ``file:line -> target``."""
    found = []
    for folder, banned in FORBIDDEN.items():
        for path in sorted((root / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    targets = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and not node.level:
                    targets = [node.module or ""]
                elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                        and MODULE_PATH.fullmatch(node.value):
                    targets = [node.value]
                else:
                    continue
                for target in targets:
                    if target.split(".")[0] in banned:
                        where = path.relative_to(root)
                        found.append(f"{where}:{node.lineno} -> {target}")
    return found


def runnable(root: Path = ROOT) -> set[str]:
    """The modules of bench/ that run as a bench (a ``__main__`` block)."""
    return {path.stem for path in (root / "bench").glob("*.py")
            if not path.name.startswith("_") and 'if __name__ == "__main__":' in path.read_text()}


def test_bench_and_tests_do_not_import_each_other() -> None:
    assert crossings() == []


def test_the_check_catches_each_crossing(tmp_path: Path) -> None:
    files = {
        "bench/__init__.py": "",
        "bench/a.py": "from tests.conftest import ROOT\n",
        "bench/b.py": 'ENV = {"VOXQUEUE_TOOL_MODULES": "tests.tool_modules.probe_tools"}\n',
        "bench/fine.py": "from testkit import ROOT\nfrom bench import harness\n"
                         '"""Not tests.conftest, a docstring."""\n',
        "tests/__init__.py": "",
        "tests/c.py": "def f():\n    import bench.latency\n",
        "testkit/__init__.py": "",
        "testkit/d.py": "from tests import fakes\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    assert crossings(tmp_path) == [
        "bench/a.py:1 -> tests.conftest",
        "bench/b.py:1 -> tests.tool_modules.probe_tools",
        "tests/c.py:2 -> bench.latency",
        "testkit/d.py:1 -> tests",
    ]


def test_vq_bench_lists_every_bench_with_nothing_installed(tmp_path: Path) -> None:
    venv = tmp_path / "no-venv"
    env = {**os.environ, "PYTHON": sys.executable, "VOXQUEUE_VENV": str(venv)}
    done = subprocess.run([str(ROOT / "vq"), "bench"], env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    listed = {m.group(1) for m in re.finditer(r"^(\w+)  ", done.stdout, re.MULTILINE)}
    assert listed == runnable() and "cpu_before_after" in listed
    assert "cpu_before_after --before" in done.stdout  # which one to run before a change
    assert not venv.exists()  # the list installs nothing


def test_the_index_has_a_row_for_every_bench() -> None:
    index = (ROOT / "bench" / "README.md").read_text(encoding="utf-8")
    rows = set(re.findall(r"^\| `(\w+)[^`]*` \|", index, re.MULTILINE))
    assert rows == runnable()
