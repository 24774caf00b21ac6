"""The web: a page's readable text, fetched through the SSRF guard."""

from __future__ import annotations

import contextlib
import json

from workers.tools.builtin._deps import runtime
from workers.tools.builtin.html_text import html_to_text
from workers.tools.net import safe_get
from workers.tools.registry import tool

__all__ = ["fetch_url"]

_TEXT_TYPES = (
    "text/plain",
    "text/markdown",
    "text/csv",
    "application/json",
    "application/ld+json",
    "text/xml",
    "application/xml",
)


@tool(examples=("read {url}", "open {url}", "what does {url} say", "fetch {url}"))
def fetch_url(url: str) -> str:
    """Fetch a web page and return its readable text (public http and https addresses only).

    Args:
        url: The full address, such as "https://example.com/page".
    """
    target = url.strip()
    if "://" not in target:
        target = "https://" + target
    s = runtime().settings
    page = safe_get(target, s, headers={"Accept": "text/html, text/plain;q=0.9, */*;q=0.5"})
    if not page.ok:
        raise RuntimeError(f"{page.url} answered HTTP {page.status}")
    kind = page.content_type
    if kind in ("text/html", "application/xhtml+xml") or (
        not kind and b"<html" in page.content[:2000].lower()
    ):
        title, text = html_to_text(page.text())
    elif kind.startswith("text/") or kind in _TEXT_TYPES or kind.endswith("+json"):
        title, text = "", page.text()
        if "json" in kind and not page.truncated:
            with contextlib.suppress(ValueError):
                text = json.dumps(json.loads(text), ensure_ascii=False, indent=1)
    else:
        raise ValueError(f"{page.url} is {kind or 'of an unknown type'}, not a page with text")
    body = "\n".join(line for line in (title, text.strip()) if line)
    if not body:
        return f"{page.url} has no readable text."
    if page.truncated:
        body += f"\n[the page is larger than {s.fetch_max_bytes} bytes; only its start was read]"
    return body
