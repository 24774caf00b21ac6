"""Every relative link in README.md, ARCHITECTURE.md and docs/*.md points to a file that exists,
and its ``#anchor``, if any, to a heading of that file (as GitHub names headings)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.structure.import_graph import ROOT

_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^\s*(```|~~~)")
_CODE = re.compile(r"`[^`]*`")


def pages(root: Path) -> list[Path]:
    """The markdown pages whose links are checked."""
    return sorted([*(p for p in (root / "README.md", root / "ARCHITECTURE.md") if p.exists()),
                   *(root / "docs").glob("*.md")])


def prose(text: str) -> list[str]:
    """The page's lines outside fenced code blocks."""
    lines, fenced = [], False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def anchors(page: Path) -> set[str]:
    """The anchors GitHub gives the page's headings (``## A, b`` → ``a-b``; repeats get -1…)."""
    found: set[str] = set()
    for line in prose(page.read_text()):
        if not (match := re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)):
            continue
        text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", match.group(1)).replace("`", "")
        slug = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")
        name, n = slug, 0
        while name in found:
            n += 1
            name = f"{slug}-{n}"
        found.add(name)
    return found


def broken_links(root: Path) -> list[str]:
    """Every relative link of the pages that leads nowhere, as ``page: target``."""
    broken = []
    for page in pages(root):
        for line in prose(page.read_text()):
            for target in _LINK.findall(_CODE.sub("", line)):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:…
                    continue
                path, _, anchor = target.partition("#")
                dest = (page.parent / path).resolve() if path else page
                if not dest.exists():
                    broken.append(f"{page.relative_to(root)}: {target} (no such file)")
                elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                    broken.append(f"{page.relative_to(root)}: {target} (no such heading)")
    return broken


def test_every_relative_link_in_the_docs_resolves() -> None:
    assert pages(ROOT) and (ROOT / "docs" / "README.md") in pages(ROOT)
    assert broken_links(ROOT) == []


def test_the_check_finds_a_missing_file_and_a_missing_heading(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text(
        "# A page\n\n## Crash points, and `how`\n\n```\n[not a link](nowhere.md)\n```\n")
    (tmp_path / "README.md").write_text(
        "[ok](docs/a.md#crash-points-and-how) [ok](#title) [web](https://example.com/x.md)\n"
        "# Title\n[gone](docs/b.md) [bad anchor](docs/a.md#nope) `[code](nowhere.md)`\n")
    assert broken_links(tmp_path) == ["README.md: docs/b.md (no such file)",
                                      "README.md: docs/a.md#nope (no such heading)"]
