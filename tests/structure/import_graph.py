"""The import graph of voxqueue/, workers/ and edge/, read from the source with ast.

Every import counts, the ones inside functions and under `if TYPE_CHECKING:` too: a circle
that closes only at call time, or only for the type checker, is still a circle for the person
reading the code.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("voxqueue", "workers", "edge")


@dataclass(frozen=True)
class Import:
    """One import statement's target, where it was written, and whether inside a function."""

    source: str
    target: str
    line: int
    in_function: bool
    type_only: bool = False


@dataclass
class Graph:
    """Modules by dotted name, and the imports between them."""

    modules: dict[str, Path] = field(default_factory=dict)
    imports: list[Import] = field(default_factory=list)

    def edges(self) -> dict[str, set[str]]:
        """Who imports whom, `if TYPE_CHECKING:` imports included: a concept split across two
        files that name each other is a circle to the reader even if it never runs."""
        out: dict[str, set[str]] = {name: set() for name in self.modules}
        for imp in self.imports:
            if imp.target in self.modules and imp.target != imp.source:
                out[imp.source].add(imp.target)
        return out

    def circles(self) -> list[list[str]]:
        """Strongly connected components of more than one module (Tarjan)."""
        edges = self.edges()
        index: dict[str, int] = {}
        low: dict[str, int] = {}
        stack: list[str] = []
        on_stack: set[str] = set()
        found: list[list[str]] = []
        counter = 0

        def visit(node: str) -> None:
            nonlocal counter
            index[node] = low[node] = counter
            counter += 1
            stack.append(node)
            on_stack.add(node)
            for nxt in sorted(edges[node]):
                if nxt not in index:
                    visit(nxt)
                    low[node] = min(low[node], low[nxt])
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))

        for name in sorted(edges):
            if name not in index:
                visit(name)
        return found


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(graph_modules: set[str], base: str, name: str | None) -> str:
    """The deepest module of ours that `from base import name` names."""
    if name:
        candidate = f"{base}.{name}"
        if candidate in graph_modules:
            return candidate
    return base


def _walk(tree: ast.AST) -> Iterator[tuple[ast.AST, bool]]:
    def rec(node: ast.AST, inside: bool) -> Iterator[tuple[ast.AST, bool]]:
        for child in ast.iter_child_nodes(node):
            is_func = isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            yield child, inside
            yield from rec(child, inside or is_func)

    yield from rec(tree, False)


def _type_checking_only(tree: ast.Module) -> set[int]:
    """Lines of imports under `if TYPE_CHECKING:` (they never run, but they still count)."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for inner in node.body:
                for sub in ast.walk(inner):
                    if isinstance(sub, ast.Import | ast.ImportFrom):
                        lines.add(sub.lineno)
    return lines


def build(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> Graph:
    """The graph of ``packages`` under ``root``."""
    graph = Graph()
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            graph.modules[module_name(path, root)] = path
    names = set(graph.modules)
    for source, path in graph.modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        skip = _type_checking_only(tree)
        is_package = path.name == "__init__.py"
        for node, inside in _walk(tree):
            typed = isinstance(node, ast.Import | ast.ImportFrom) and node.lineno in skip
            if isinstance(node, ast.Import):
                for alias in node.names:
                    graph.imports.append(Import(source, alias.name, node.lineno, inside, typed))
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = source.split(".")
                    if not is_package:
                        anchor = anchor[:-1]
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join([*anchor, *([base] if base else [])])
                for alias in node.names:
                    target = _resolve(names, base, alias.name)
                    graph.imports.append(Import(source, target, node.lineno, inside, typed))
    return graph


if __name__ == "__main__":
    g = build()
    print(f"{len(g.modules)} modules, {sum(len(v) for v in g.edges().values())} edges")
    for circle in g.circles():
        print("circle:", " ".join(circle))
    for imp in g.imports:
        if imp.in_function and imp.target.startswith(PACKAGES):
            print(f"in function: {imp.source}:{imp.line} -> {imp.target}")
