"""The benchmarks, listed: ``python -m bench`` (``./vq bench``) prints each runnable one with the
first paragraph of its docstring. Nothing is imported: the list needs no installed packages.

``./vq bench NAME [args]`` runs one; bench/README.md says what each answers and how long it takes.
"""

from __future__ import annotations

import ast
import shutil
import textwrap
from pathlib import Path

HERE = Path(__file__).resolve().parent


def benches() -> dict[str, str]:
    """Every module of bench/ with a ``__main__`` block, and its docstring's first paragraph."""
    found = {}
    for path in sorted(HERE.glob("*.py")):
        if path.name.startswith("_"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if any(isinstance(node, ast.If) and "'__main__'" in ast.dump(node.test)
               for node in tree.body):
            doc = ast.get_docstring(tree) or ""
            found[path.stem] = " ".join(doc.split("\n\n")[0].split())
    return found


def main() -> None:
    found = benches()
    width = min(shutil.get_terminal_size().columns, 100)
    pad = max(map(len, found)) + 2
    print("Benchmarks (./vq bench NAME [--help | args]; what each answers and how long it takes:"
          " bench/README.md):\n")
    for name, summary in found.items():
        print(textwrap.fill(summary, width, initial_indent=name.ljust(pad),
                            subsequent_indent=" " * pad))
    print("\nDid a change make it slower? ./vq bench cpu_before_after --before main")


if __name__ == "__main__":
    main()
