"""LLM providers: the protocol in ``base``, one module per provider, chosen by settings."""

from __future__ import annotations

from typing import TYPE_CHECKING

from voxqueue.settings import Settings
from workers.agent.providers.base import ChatModel

if TYPE_CHECKING:
    from workers.tool_registry.registry import ToolRegistry


def select_chat_model(settings: Settings, tools: ToolRegistry) -> ChatModel:
    """The provider named by ``VOXQUEUE_LLM`` (``auto``: OpenAI with a key, else local intents)."""
    choice = settings.providers.in_use()["llm"]
    if choice == "openai":
        remote = openai_model(settings)
        if settings.providers.prefer_local:
            from workers.agent.providers.local_intents import LocalIntents
            from workers.agent.providers.prefer_local import PreferLocal

            return PreferLocal(LocalIntents(settings, tools), remote)
        return remote
    if choice == "local":
        from workers.agent.providers.local_intents import LocalIntents

        return LocalIntents(settings, tools)
    raise ValueError(f"unknown LLM provider {settings.providers.llm!r} (VOXQUEUE_LLM): "
                     "use auto, openai or local")


def openai_model(settings: Settings) -> ChatModel:
    """OpenAI's model through the API ``VOXQUEUE_OPENAI_API`` names (``chat`` or
    ``responses``)."""
    if settings.providers.openai_api == "responses":
        from workers.agent.providers.openai_responses import OpenAIResponses

        return OpenAIResponses(settings)
    from workers.agent.providers.openai_chat import OpenAIChat

    return OpenAIChat(settings)
