"""News headlines from RSS and Atom feeds: a configured feed by name, or a feed URL."""

from __future__ import annotations

import io

from workers.tool_registry.context import runtime
from workers.tool_registry.egress import check_model_url
from workers.tool_registry.net import host_of, safe_get
from workers.tool_registry.registry import tool

__all__ = ["news_headlines"]


@tool(
    examples=(
        "what's the news",
        "what are the headlines",
        "read the {feed_url_or_name} news",
        "what are the headlines from {feed_url_or_name}",
    ),
    reads_untrusted=True,
    service="the news feed",
)
def news_headlines(feed_url_or_name: str = "", count: int = 5) -> str:
    """Read the latest headlines of a news feed.

    Args:
        feed_url_or_name: A configured feed's name (such as "bbc"), an RSS or Atom feed URL,
            or empty for the first configured feed.
        count: How many headlines (1 to 20).
    """
    import feedparser

    if not 1 <= count <= 20:
        raise ValueError("count must be between 1 and 20")
    s = runtime().settings
    wanted = feed_url_or_name.strip()
    feeds = {name.lower(): url for name, url in s.tools.news_feeds.items()}
    allow: list[str] = []
    if not wanted:
        if not feeds:
            raise ValueError("no news feeds are configured (VOXQUEUE_NEWS_FEEDS); give a URL")
        wanted = next(iter(s.tools.news_feeds))
    if wanted.lower() in feeds:
        url = feeds[wanted.lower()]
        allow.append(host_of(url))  # configured by the operator
    elif "://" in wanted or ("." in wanted and " " not in wanted):
        url = wanted if "://" in wanted else "https://" + wanted
        check_model_url(url, s)  # a feed URL from the model: as fetch_url's (tool_registry.egress)
    else:
        names = ", ".join(s.tools.news_feeds) or "none"
        raise ValueError(f"no feed named {wanted!r}; configured feeds: {names}; or give a URL")
    result = safe_get(
        url,
        s,
        allow=allow,
        headers={"Accept": "application/rss+xml, application/atom+xml, application/xml, text/xml"},
    )
    if not result.ok:
        raise RuntimeError(f"the feed at {result.url} answered HTTP {result.status}")
    parsed = feedparser.parse(
        io.BytesIO(result.content),
        response_headers={
            "content-location": result.url,
            "content-type": result.headers.get("content-type", "application/xml"),
        },
    )
    titles = [" ".join(str(e.get("title", "")).split()) for e in parsed.entries]
    titles = [t for t in titles if t][:count]
    if not titles:
        if parsed.get("bozo"):
            raise ValueError(f"{result.url} is not a readable RSS or Atom feed")
        return "That feed has no headlines right now."
    source = " ".join(str(parsed.feed.get("title", "")).split()) or wanted
    listed = " ".join(f"{i}. {t.rstrip('.')}." for i, t in enumerate(titles, 1))
    return f"Headlines from {source}: {listed}"
