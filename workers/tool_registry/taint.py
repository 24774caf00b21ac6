"""A tainted turn read text others wrote (a web page, a feed, an alert): its side effects wait for
the person's spoken yes (``workers.tools.guard``), and a URL the model chooses must be one the
person said or a page's link (``workers.tool_registry.egress``). Tainting is written by the tools
worker after a reader's result, and by the agent when it injects alerts."""

from __future__ import annotations

from voxqueue.keys import Keys
from voxqueue.settings import Settings


def taint_writes(keys: Keys, settings: Settings, turn_id: str, session_id: str,
                 reason: str) -> list[tuple[str, str, str, str, int]]:
    """The commands that taint a turn and its session (for a ``Once`` or a pipeline)."""
    return [("SET", keys.turn_untrusted(turn_id), reason, "EX", settings.turns.ttl_s),
            ("SET", keys.session_untrusted(session_id), turn_id, "EX",
             settings.turns.session_ttl_s)]
