"""Text for the ear: what a voice is given to say, never what the model wrote verbatim.

Two steps, each its own module: :mod:`.markdown` turns markup into plain sentences as the reply
streams (before it is cut into sentences, so list items become sentences of their own), and
:mod:`.words` writes out what a given engine would misread (ids, units, times, money). The
reply text in events and history is never changed; only speech is.
"""

from __future__ import annotations

from voxqueue.spoken.markdown import MarkdownFilter, plain
from voxqueue.spoken.words import Reading, words

__all__ = ["MarkdownFilter", "Reading", "for_speech", "plain", "words"]


def for_speech(text: str, reading: Reading = Reading.WORDS) -> str:
    """A sentence (markdown or not) as ``reading``'s engine should be given it."""
    return words(plain(text), reading)
