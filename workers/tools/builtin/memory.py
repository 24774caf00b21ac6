"""Memory: facts a person asks the assistant to keep, per device (or session), in Redis.

The owner carries its kind (``device:kitchen``, ``session:kitchen``). Facts stored before that,
under the bare name, are adopted by the device of that name on its first use (a session never
adopts them: it could be named like a device).
"""

from __future__ import annotations

import contextlib
import json
import re
import time
import uuid

import redis

from workers.tool_registry.context import owner, runtime
from workers.tool_registry.registry import tool

__all__ = ["forget", "recall", "remember"]

MAX_FACTS = 200
MAX_FACT_CHARS = 500
_EVERYTHING = {"", "everything", "all", "anything", "all of it", "what you know"}
_STOP = {
    "a",
    "an",
    "the",
    "and",
    "or",
    "of",
    "to",
    "in",
    "on",
    "at",
    "for",
    "is",
    "are",
    "was",
    "were",
    "be",
    "it",
    "that",
    "this",
    "what",
    "where",
    "when",
    "who",
    "how",
    "do",
    "did",
    "you",
    "me",
    "i",
    "about",
    "remember",
    "know",
    "tell",
    "my",
    "mine",
    "your",
}


def _words(text: str) -> set[str]:
    """Content words, lower-cased, plural "s" dropped."""
    found = set()
    for word in re.findall(r"[\w']+", text.lower()):
        word = word.removesuffix("'s")
        if word in _STOP:
            continue
        found.add(word[:-1] if len(word) > 3 and word.endswith("s") else word)
    return found


def _key() -> str:
    """The owner's memory hash, after adopting a device's facts kept under its bare name."""
    rt = runtime()
    who = owner()
    key = rt.keys.memory(who)
    if who.startswith("device:"):
        legacy = rt.keys.memory(who.removeprefix("device:"))
        if rt.redis.exists(legacy):
            # Kept as is when the new hash exists; gone meanwhile when another call adopted it.
            with contextlib.suppress(redis.ResponseError):
                rt.redis.renamenx(legacy, key)
    return key


def _facts() -> dict[str, dict[str, object]]:
    rt = runtime()
    raw = rt.redis.hgetall(_key())
    facts = {}
    for key, value in raw.items():
        name = key.decode() if isinstance(key, bytes) else str(key)
        facts[name] = json.loads(value)
    return facts


def _ranked(query: str) -> list[tuple[float, str, str]]:
    """(score, id, fact) of the facts sharing words with ``query``, best and newest first."""
    wanted = _words(query)
    scored = []
    for fid, fact in _facts().items():
        text = str(fact["fact"])
        if not wanted:
            continue
        score = len(wanted & _words(text)) / len(wanted)
        if score > 0:
            scored.append((score, float(str(fact.get("ts", 0))), fid, text))
    scored.sort(key=lambda s: (s[0], s[1]), reverse=True)
    return [(s, fid, text) for s, _, fid, text in scored]


@tool(
    side_effects=True,
    examples=("remember that {fact}", "remember {fact}", "don't forget that {fact}"),
)
def remember(fact: str) -> str:
    """Keep a fact for later, such as where the car is parked or a friend's birthday.

    Args:
        fact: The fact in the person's words, such as "my car is on level 3".
    """
    text = " ".join(fact.split()).rstrip(".")
    text = re.sub(r"^(that)\s+", "", text, flags=re.IGNORECASE)
    if not text:
        raise ValueError("there is nothing to remember: give the fact")
    if len(text) > MAX_FACT_CHARS:
        raise ValueError(f"that is too long to remember (max {MAX_FACT_CHARS} characters)")
    rt = runtime()
    key = _key()
    facts = _facts()
    for old in facts.values():
        if str(old["fact"]).lower() == text.lower():
            return f"I already know that {text}."
    if len(facts) >= MAX_FACTS:  # forget the oldest to make room
        oldest = min(facts, key=lambda f: float(str(facts[f].get("ts", 0))))
        rt.redis.hdel(key, oldest)
    rt.redis.hset(key, uuid.uuid4().hex[:8], json.dumps({"fact": text, "ts": time.time()}))
    return f"OK, I'll remember that {text}."


@tool(
    examples=(
        "what do you remember about {query}",
        "do you remember {query}",
        "what do you know about {query}",
        "what do you remember",
    )
)
def recall(query: str = "") -> str:
    """Recall remembered facts about something (or everything when the query is empty).

    Args:
        query: What to look for, such as "car" or "Anna's birthday"; empty for everything.
    """
    if query.strip().lower() in _EVERYTHING:
        facts = sorted(_facts().values(), key=lambda f: float(str(f.get("ts", 0))), reverse=True)
        if not facts:
            return "I have nothing remembered yet."
        return "You told me: " + "; ".join(str(f["fact"]) for f in facts[:10]) + "."
    found = _ranked(query)
    if not found:
        return f"I don't remember anything about {query}."
    return "You told me: " + "; ".join(text for _, _, text in found[:3]) + "."


@tool(
    side_effects=True,
    examples=("forget {query}", "forget about {query}", "forget what I said about {query}"),
)
def forget(query: str) -> str:
    """Forget the remembered facts that best match the query ("everything" forgets all).

    Args:
        query: Which fact to forget, such as "the car", or "everything".
    """
    if not query.strip():
        raise ValueError("say what to forget, or 'everything'")
    rt = runtime()
    key = _key()
    if query.strip().lower() in _EVERYTHING:
        count = len(_facts())
        rt.redis.delete(key)
        return f"I forgot everything ({count} fact{'' if count == 1 else 's'})."
    found = _ranked(query)
    if not found or found[0][0] < 0.5:
        return f"I had nothing about {query} to forget."
    best = found[0][0]
    chosen = [(fid, text) for score, fid, text in found if score == best]
    rt.redis.hdel(key, *[fid for fid, _ in chosen])
    return "Forgot: " + "; ".join(text for _, text in chosen) + "."
