"""The web: a page's readable text, fetched through the SSRF guard. Before the conversation has
read text others wrote, only from a site the person named this turn (or one
``VOXQUEUE_FETCH_ALLOWED_HOSTS`` lists); after, only a URL the person said or a link on a page
read in the session, exactly (:mod:`workers.tool_registry.egress`): a URL a page asked for, or one
the model changed, is refused, so what the model knows does not leave in it."""

from __future__ import annotations

import contextlib
import json
from typing import Annotated

from pydantic import AfterValidator

from workers.tool_registry.context import current_call, runtime
from workers.tool_registry.egress import check_model_url, links_on_page, record_links
from workers.tool_registry.net import safe_get
from workers.tool_registry.registry import tool
from workers.tools.builtin.html_text import html_to_text

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


def _address(url: str) -> str:
    """Only something shaped like a web address: "open the garage door" is not one."""
    target = url.strip()
    # A URL's scheme and host are the SSRF guard's to judge; a bare address needs a dot.
    bare_host = "://" not in target and "." not in target.split("/", 1)[0]
    if not target or any(c.isspace() for c in target) or bare_host:
        raise ValueError("not a web address: give one like https://example.com/page")
    return target


Address = Annotated[str, AfterValidator(_address)]


@tool(examples=("read {url}", "open {url}", "what does {url} say", "fetch {url}"),
      reads_untrusted=True, service="that web page")
def fetch_url(url: Address) -> str:
    """Fetch a web page and return its readable text (public http and https addresses only).

    Args:
        url: The full address, such as "https://example.com/page".
    """
    target = url.strip()
    if "://" not in target:
        target = "https://" + target
    s = runtime().settings
    check_model_url(target, s)
    page = safe_get(target, s, headers={"Accept": "text/html, text/plain;q=0.9, */*;q=0.5"})
    if not page.ok:
        raise RuntimeError(f"{page.url} answered HTTP {page.status}")
    kind = page.content_type
    if kind in ("text/html", "application/xhtml+xml") or (
        not kind and b"<html" in page.content[:2000].lower()
    ):
        title, text = html_to_text(page.text())
        record_links(current_call(), links_on_page(page.text(), page.url, html=True))
    elif kind.startswith("text/") or kind in _TEXT_TYPES or kind.endswith("+json"):
        title, text = "", page.text()
        if "json" in kind and not page.truncated:
            with contextlib.suppress(ValueError):
                text = json.dumps(json.loads(text), ensure_ascii=False, indent=1)
        record_links(current_call(), links_on_page(text, page.url, html=False))
    else:
        raise ValueError(f"{page.url} is {kind or 'of an unknown type'}, not a page with text")
    body = "\n".join(line for line in (title, text.strip()) if line)
    if not body:
        return f"{page.url} has no readable text."
    if page.truncated:
        body += (f"\n[the page is larger than {s.tools.fetch_max_bytes} bytes; "
                 "only its start was read]")
    return body
