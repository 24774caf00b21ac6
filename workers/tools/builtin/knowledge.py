"""Knowledge: the summary of a Wikipedia article (REST API ``/page/summary/{title}``)."""

from __future__ import annotations

import re
from urllib.parse import quote

from workers.tool_registry.context import runtime
from workers.tool_registry.net import host_of, safe_get
from workers.tool_registry.registry import tool

__all__ = ["wikipedia_summary"]

MAX_SUMMARY_CHARS = 700


@tool(
    examples=(
        "who is {topic}",
        "who was {topic}",
        "what is {topic} on wikipedia",
        "tell me about {topic}",
    ),
    reads_untrusted=True,
    service="Wikipedia",
)
def wikipedia_summary(topic: str) -> str:
    """Get a short encyclopedia summary of a topic, person or place from Wikipedia.

    Args:
        topic: The article title or subject, such as "Ada Lovelace" or "Eiffel Tower".
    """
    name = " ".join(topic.split())
    if not name:
        raise ValueError("say which topic to look up")
    s = runtime().settings
    base = s.tools.wikipedia_url.rstrip("/")
    title = quote(name.replace(" ", "_"), safe="")
    result = safe_get(
        f"{base}/page/summary/{title}",
        settings=s,
        allow=[host_of(base)],
        headers={"Accept": "application/json"},
    )
    if result.status == 404:
        return f"Wikipedia has no article called {name}."
    if not result.ok:
        raise RuntimeError(f"Wikipedia answered HTTP {result.status}")
    try:
        data = result.json()
    except ValueError:
        raise RuntimeError("Wikipedia sent an answer that is not JSON") from None
    found = str(data.get("title") or name)
    if data.get("type") == "disambiguation":
        return (
            f"{found} can mean several things on Wikipedia; ask about one of them more precisely."
        )
    extract = " ".join(str(data.get("extract") or "").split())
    if not extract:
        return f"Wikipedia's article on {found} has no summary."
    return _shorten(extract, MAX_SUMMARY_CHARS)


def _shorten(text: str, limit: int) -> str:
    """Whole sentences up to ``limit`` characters (at least the first sentence, cut)."""
    if len(text) <= limit:
        return text
    sentences = re.split(r"(?<=[.!?])\s+", text)
    kept = ""
    for sentence in sentences:
        if len(kept) + len(sentence) + 1 > limit:
            break
        kept = f"{kept} {sentence}".strip()
    return kept or text[: limit - 1].rstrip() + "…"
