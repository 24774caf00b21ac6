"""What may leave through a URL the model chose: nothing that a page told it to send.

A model that read text others wrote (a page, a feed, an MCP result, an alert: the turn or its
session is tainted, :mod:`workers.tool_registry.taint`) may have been told to put what it knows (the
memory it recalled, the history with the person's words) into a URL. So once the turn or its
session is tainted, a model-made request goes only to a URL the person said in the session's
own words (this turn's or an earlier user message), or to a link present on a page fetched in
the session, exactly: a new path, an added or changed query string or user name is refused
with a message for the model. Memory and history need no mark of their own: after untrusted
text nothing outside that set leaves, whichever was read first. Before any untrusted text,
``fetch_url`` opens a host the person named this turn (or ``VOXQUEUE_FETCH_ALLOWED_HOSTS``
lists). A server's redirects are followed: the server chose them, not the model.

Left open, and bounded: which of a page's links the model follows (at most
:data:`MAX_LINKS_PER_PAGE` are recorded per page), and free-form queries to the operator's own
services (weather, Wikipedia), whose logs a page's author cannot read.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urljoin

import httpx

from voxqueue.settings import Settings
from workers.tool_registry.context import ToolCall, current_call, runtime
from workers.tool_registry.net import BlockedURLError
from workers.tool_registry.policy import host_in, named_hosts, split_list

#: Links of one page kept as followable (in page order; the rest are not).
MAX_LINKS_PER_PAGE = 200
_URL = re.compile(r"https?://[^\s<>\"'`{}|\\^\[\]]+", re.IGNORECASE)
_BARE = re.compile(
    r"(?<![\w@./:-])"
    r"((?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z][a-z0-9-]{0,61}[a-z0-9]"
    r"|\d{1,3}(?:\.\d{1,3}){3})"
    r"(:\d{1,5})?(/[^\s<>\"'`]*)?",
    re.IGNORECASE,
)
_TRAILING = ".,;:!?)]}'\""


class EgressRefused(PermissionError):
    """A model-made URL that could carry what the model read out of the system."""


def canonical(url: str) -> str | None:
    """The form two URLs are compared in: host (lower-case, no ``www.``), port when not the
    default, user info, path (no trailing slash) and query as sent; scheme and fragment
    dropped (they carry nothing to the server). None when not an http(s) URL with a host."""
    try:
        parsed = httpx.URL(url.strip())
    except (httpx.InvalidURL, TypeError, ValueError):
        return None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        return None
    host = parsed.host.lower().rstrip(".").removeprefix("www.")
    netloc = f"[{host}]" if ":" in host else host
    if parsed.port not in (None, {"http": 80, "https": 443}[parsed.scheme]):
        netloc += f":{parsed.port}"
    if parsed.userinfo:
        netloc = parsed.userinfo.decode("ascii", "replace") + "@" + netloc
    path, _, query = parsed.raw_path.decode("ascii", "replace").partition("?")
    return netloc + (path.rstrip("/") or "/") + (f"?{query}" if query else "")


def _clean(found: str) -> str:
    return found.rstrip(_TRAILING)


def urls_said(text: str) -> set[str]:
    """Canonical URLs in the person's words: written in full ("https://a.org/x?y=1"), or an
    address without a scheme ("example.com/news", "example dot com", "10.0.0.2:8080/x")."""
    found: set[str] = set()
    spoken = re.sub(r"\s+dot\s+", ".", text, flags=re.IGNORECASE)
    for match in _URL.finditer(spoken):
        found.add(canonical(_clean(match.group(0))) or "")
    without = _URL.sub(" ", spoken)
    for match in _BARE.finditer(without):
        found.add(canonical("http://" + _clean(match.group(0))) or "")
    found.discard("")
    return found


class _Links(HTMLParser):
    """The targets of ``<a>``, ``<area>`` and ``<link>`` (and the ``<base>``)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.base: str | None = None
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        href = dict(attrs).get("href")
        if not href:
            return
        if tag == "base" and self.base is None:
            self.base = href.strip()
        elif tag in ("a", "area", "link"):
            self.hrefs.append(href.strip())


def links_on_page(body: str, page_url: str, *, html: bool) -> list[str]:
    """Canonical links of a fetched page, in page order, at most :data:`MAX_LINKS_PER_PAGE`:
    its anchors (resolved against the page's final URL) and every URL written in its text."""
    hrefs: list[str] = []
    base = page_url
    if html:
        parser = _Links()
        with contextlib.suppress(Exception):  # a broken page still gives what was read
            parser.feed(body)
            parser.close()
        base = urljoin(page_url, parser.base) if parser.base else page_url
        hrefs = parser.hrefs
    found: list[str] = []
    for raw in [*hrefs, *(_clean(m.group(0)) for m in _URL.finditer(body))]:
        link = canonical(urljoin(base, raw))
        if link is not None and link not in found:
            found.append(link)
            if len(found) >= MAX_LINKS_PER_PAGE:
                break
    return found


@dataclass(frozen=True)
class Egress:
    """What the call's turn has read, and the URLs a request may go to once it is tainted."""

    tainted: bool
    allowed: frozenset[str]

    def admits(self, url: str) -> bool:
        found = canonical(url)
        return found is not None and found in self.allowed


def _user_texts(raw_messages: Iterable[Any]) -> list[str]:
    texts = []
    for raw in raw_messages:
        with contextlib.suppress(ValueError, TypeError):
            message = json.loads(raw)
            if message.get("role") == "user" and isinstance(message.get("content"), str):
                texts.append(message["content"])
    return texts


def egress_of(call: ToolCall) -> Egress:
    """The call's turn and session, read from Redis in one round trip."""
    rt = runtime()
    keys = rt.keys
    pipe = rt.redis.pipeline(transaction=False)
    pipe.exists(keys.turn_untrusted(call.turn_id), keys.session_untrusted(call.session_id))
    pipe.lrange(keys.messages(call.session_id), 0, -1)
    pipe.smembers(keys.session_links(call.session_id))
    tainted, messages, links = pipe.execute()
    allowed: set[str] = set()
    for text in [call.utterance or "", *_user_texts(messages)]:
        allowed |= urls_said(text)
    allowed |= {m.decode() if isinstance(m, bytes) else str(m) for m in links}
    return Egress(bool(tainted), frozenset(allowed))


def check_model_url(url: str, settings: Settings, *, named_host: bool = True) -> None:
    """Refuse (a PermissionError, before any lookup) a model-given URL that may carry data
    away: after untrusted text, one neither said by the person nor linked from a page read in
    the session; before, with ``named_host``, one whose host the person did not name this turn
    and no setting allows. Outside a turn (plain Python) no model chose it: nothing is refused."""
    call = current_call()
    if call is None:
        return
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError) as exc:
        raise ValueError(f"invalid URL {url!r}: {exc}") from None
    if parsed.scheme not in ("http", "https"):
        raise BlockedURLError(f"only http and https URLs are opened, not {url!r}")
    egress = egress_of(call)
    if egress.tainted:
        if egress.admits(url):
            return
        raise EgressRefused(
            f"not sent: this conversation has read text from pages or other sources, so a web "
            f"address is opened only when the person said it or it is a link on a page read "
            f"here, exactly as written (no new path, no added or changed query); {url} is "
            "neither. Do not change the address; ask the person to say it if they want it.")
    if not named_host:
        return
    host = parsed.host
    if host_in(host, named_hosts(call.utterance or "")) or host_in(
            host, split_list(settings.tools.fetch_allowed_hosts)):
        return
    raise PermissionError(
        f"{host or url} was not named by the person in this request and is not in "
        "VOXQUEUE_FETCH_ALLOWED_HOSTS; only sites the person names are opened. Ask them to say "
        "the site's address.")


def check_model_urls(arguments: Any) -> None:
    """:func:`check_model_url` (after untrusted text only) for every URL written anywhere in a
    tool's arguments (an MCP tool's, whose server may fetch it)."""
    urls: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            urls.extend(_clean(m.group(0)) for m in _URL.finditer(value))
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list | tuple):
            for item in value:
                walk(item)

    walk(arguments)
    if urls and current_call() is not None:
        settings = runtime().settings
        for url in urls:
            check_model_url(url, settings, named_host=False)


def record_links(call: ToolCall | None, links: list[str]) -> None:
    """Keep a fetched page's links as followable for the call's session (its lifetime)."""
    if call is None or not links:
        return
    rt = runtime()
    key = rt.keys.session_links(call.session_id)
    pipe = rt.redis.pipeline(transaction=True)
    pipe.sadd(key, *links)
    pipe.expire(key, rt.settings.turns.session_ttl_s)
    pipe.execute()
