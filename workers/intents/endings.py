"""Whether words heard so far plainly stop mid-sentence ("set a timer for"): a partial
transcript that does is not the end of a command, however long the pause."""

from __future__ import annotations

import re

#: Words an English request does not end on: articles, prepositions, conjunctions,
#: possessives, and the verbs that need what follows.
_WORDS = """
a an the my your our their his her its this that these those some any
for to of in on at by with from into about than as like per
and or but if when while because so then plus minus times over
is are was be what whats how set remind tell add remember call play turn put make
"""
DANGLING = frozenset(_WORDS.split())


def sounds_unfinished(text: str) -> bool:
    """True when the last word of ``text`` leaves the sentence hanging."""
    words = re.findall(r"[a-z']+", text.lower())
    return bool(words) and words[-1].replace("'", "") in DANGLING
