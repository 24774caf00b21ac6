"""`./vq test` exits with the tests' status, else mypy's: checked with stand-in tools."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _stand_in_checkout(tmp_path: Path, *, pytest_rc: int, mypy_rc: int) -> Path:
    """A copy of `vq` beside a venv whose ruff, mypy and python only exit with a status."""
    checkout = tmp_path / "checkout"
    bin_dir = checkout / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    shutil.copy(ROOT / "vq", checkout / "vq")
    pyproject = (ROOT / "pyproject.toml").read_bytes()
    (checkout / "pyproject.toml").write_bytes(pyproject)
    digest = hashlib.sha1(pyproject).hexdigest()[:12]
    (checkout / ".venv" / f".installed-{digest}-all-dev").touch()
    for name, rc in (("ruff", 0), ("mypy", mypy_rc), ("python", pytest_rc)):
        tool = bin_dir / name
        tool.write_text(f"#!/bin/sh\necho {name} ran \"$*\"\nexit {rc}\n")
        tool.chmod(0o755)
    return checkout


@pytest.mark.parametrize(
    ("pytest_rc", "mypy_rc", "expected"),
    [(0, 0, 0), (0, 1, 1), (1, 0, 1), (5, 1, 5)],
)
def test_vq_test_exits_with_the_tests_status_then_mypys(
    tmp_path: Path, pytest_rc: int, mypy_rc: int, expected: int
) -> None:
    checkout = _stand_in_checkout(tmp_path, pytest_rc=pytest_rc, mypy_rc=mypy_rc)
    done = subprocess.run(
        ["bash", "vq", "test", "-q"],
        cwd=checkout,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "PYTHON": sys.executable},
    )
    assert done.returncode == expected, done.stderr
    assert "mypy ran" in done.stdout  # its report is printed after the tests'
    assert "python ran -m pytest -n 2 --dist loadfile -q" in done.stdout  # two processes
