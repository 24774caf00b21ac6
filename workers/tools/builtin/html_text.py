"""Readable text from HTML with the standard library's parser (no scripts, styles or markup)."""

from __future__ import annotations

import re
from html.parser import HTMLParser

_SKIP = {"script", "style", "noscript", "template", "svg", "head", "iframe", "object", "canvas"}
_BLOCK = {
    "p",
    "div",
    "br",
    "li",
    "ul",
    "ol",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "tr",
    "table",
    "section",
    "article",
    "header",
    "footer",
    "nav",
    "aside",
    "blockquote",
    "pre",
    "hr",
    "dt",
    "dd",
    "figcaption",
    "main",
    "form",
    "title",
}
_VOID = {
    "br",
    "hr",
    "img",
    "input",
    "meta",
    "link",
    "area",
    "base",
    "col",
    "embed",
    "source",
    "track",
    "wbr",
    "param",
}


class _Extractor(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title: list[str] = []
        self.skipping: list[str] = []
        self.in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self.in_title = True
        elif tag in _SKIP and tag not in _VOID:
            self.skipping.append(tag)
        if tag in _BLOCK:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self.in_title = False
        elif self.skipping and tag == self.skipping[-1]:
            self.skipping.pop()
        elif tag in self.skipping:  # unbalanced markup: close up to the matching tag
            while self.skipping and self.skipping.pop() != tag:
                pass
        if tag in _BLOCK:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self.in_title:
            self.title.append(data)
        elif not self.skipping:
            self.parts.append(data)


def html_to_text(html: str) -> tuple[str, str]:
    """(title, text) of an HTML document: one paragraph per line, spaces collapsed."""
    parser = _Extractor()
    parser.feed(html)
    parser.close()
    lines = (
        re.sub(r"[ \t\r\f\v\u00a0]+", " ", line).strip()
        for line in "".join(parser.parts).split("\n")
    )
    text = "\n".join(line for line in lines if line)
    title = " ".join("".join(parser.title).split())
    return title, text
