"""Local intents: tool calls from the example sentences the tools declare, with no LLM."""

from workers.intents.matcher import IntentCall, IntentMatcher, matcher_for

__all__ = ["IntentCall", "IntentMatcher", "matcher_for"]
