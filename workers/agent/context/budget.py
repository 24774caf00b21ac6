"""How many tokens a model's context holds, and how many of them a request may use."""

from __future__ import annotations

from voxqueue.settings import Settings


def context_limit(settings: Settings, model: str) -> int:
    """The model's context window: an exact name in ``context_limits``, else the longest
    configured prefix ("gpt-4o-mini-2024-07-18" -> "gpt-4o-mini"), else the default."""
    limits = settings.agent.context_limits
    if model in limits:
        return int(limits[model])
    prefixes = [name for name in limits if model.startswith(name)]
    if prefixes:
        return int(limits[max(prefixes, key=len)])
    return int(settings.agent.default_context_limit)


def budget(settings: Settings, model: str) -> int:
    """Tokens a request may take before the history is compacted."""
    return int(context_limit(settings, model) * settings.agent.context_threshold)
