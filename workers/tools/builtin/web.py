"""The web: a page's readable text, fetched through the SSRF guard, from a site the person
named (or one ``VOXQUEUE_FETCH_ALLOWED_HOSTS`` lists): a URL the model made up from what it
read cannot carry the person's data away."""

from __future__ import annotations

import contextlib
import json
from typing import Annotated

import httpx
from pydantic import AfterValidator

from voxqueue.settings import Settings
from workers.toolkit.context import current_call, runtime
from workers.toolkit.net import BlockedURLError, safe_get
from workers.toolkit.policy import host_in, named_hosts, split_list
from workers.toolkit.registry import tool
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


def require_named_host(url: str, settings: Settings) -> None:
    """Refuse (a PermissionError, before any lookup or read) a model-given URL whose host
    the person did not name this turn and no setting allows, or that is not http(s).
    Outside a turn (plain Python) no model chose it, and nothing is refused."""
    call = current_call()
    if call is None:
        return
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError) as exc:
        raise ValueError(f"invalid URL {url!r}: {exc}") from None
    if parsed.scheme not in ("http", "https"):
        raise BlockedURLError(f"only http and https URLs are fetched, not {url!r}")
    host = parsed.host
    if host_in(host, named_hosts(call.utterance or "")) or host_in(
            host, split_list(settings.fetch_allowed_hosts)):
        return
    raise PermissionError(
        f"{host or url} was not named by the person in this request and is not in "
        "VOXQUEUE_FETCH_ALLOWED_HOSTS; only sites the person names are opened. Ask them to say "
        "the site's address.")


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
      reads_untrusted=True)
def fetch_url(url: Address) -> str:
    """Fetch a web page and return its readable text (public http and https addresses only).

    Args:
        url: The full address, such as "https://example.com/page".
    """
    target = url.strip()
    if "://" not in target:
        target = "https://" + target
    s = runtime().settings
    require_named_host(target, s)
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
