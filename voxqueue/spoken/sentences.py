"""Cutting reply text into sentences as it streams, so each is spoken as soon as it is whole."""

from __future__ import annotations

import re

# A sentence ends at . ! ? or … followed by whitespace; a lone initial or a number like
# "3.5" does not end one.
_BOUNDARY = re.compile(r"(?<=[.!?…])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9¿¡])")
_ABBREVIATIONS = ("mr.", "mrs.", "ms.", "dr.", "st.", "e.g.", "i.e.", "vs.", "etc.", "no.")
# Where the first phrase of a reply may be cut early: after a comma, semicolon, colon or dash.
_CLAUSE = re.compile(r"(?<=[,;:—])\s+")
_WORD = re.compile(r"\S+")
# ... or before a word that opens a new phrase (a preposition, conjunction or relative), where a
# speaker may pause: "Tomorrow will be sunny | in Lisbon with a high of twenty four degrees."
_PHRASE_OPENERS = frozenset([
    "in", "at", "with", "for", "from", "by", "and", "but", "or", "so", "because", "which", "who",
    "whose", "where", "when", "while", "until", "after", "before", "if", "although", "though",
    "unless", "since"])


class SentenceSplitter:
    """Feed text as it streams; get back the sentences completed so far.

    The reply's first piece may also end at a clause boundary once it is ``first_clause_chars``
    long ("Sure, tomorrow in Lisbon," …), or before a phrase-opening word once it has
    ``first_phrase_words`` words (0: never): speech starts sooner. Later pieces are whole
    sentences, which sound better.
    """

    def __init__(self, min_chars: int = 12, first_clause_chars: int = 24,
                 first_phrase_words: int = 4) -> None:
        self.min_chars = min_chars
        self.first_clause_chars = first_clause_chars
        self.first_phrase_words = first_phrase_words
        self._buffer = ""
        self._emitted = False

    def feed(self, text: str) -> list[str]:
        self._buffer += text
        out: list[str] = []
        start = 0
        for match in _BOUNDARY.finditer(self._buffer):
            candidate = self._buffer[start:match.start()].strip()
            if len(candidate) < self.min_chars or candidate.lower().endswith(_ABBREVIATIONS):
                continue
            out.append(candidate)
            start = match.end()
        if not out and not self._emitted:
            for match in _CLAUSE.finditer(self._buffer):
                candidate = self._buffer[:match.start()].strip()
                if len(candidate) >= self.first_clause_chars:
                    out.append(candidate)
                    start = match.end()
                    break
        if (not out and not self._emitted and self.first_phrase_words
                and (cut := self._phrase_break()) is not None):
            out.append(self._buffer[:cut].strip())
            start = cut
        self._emitted = self._emitted or bool(out)
        self._buffer = self._buffer[start:]
        return out

    def _phrase_break(self) -> int | None:
        """Where the first phrase may end: before a phrase-opening word, or None.

        The cut is made as soon as the opener's token arrives, one token sooner than waiting
        for the next word: an LLM's tokens hold whole common words (" in", " with"), and in the
        rare case the next token lengthens it ("in" + "land") the cut still falls between two
        words, which the next sentence's ``previous_text`` keeps smooth.
        """
        for i, word in enumerate(_WORD.finditer(self._buffer)):
            if i >= self.first_phrase_words and word.group().lower() in _PHRASE_OPENERS:
                return word.start()
        return None

    def flush(self) -> list[str]:
        rest, self._buffer = self._buffer.strip(), ""
        return [rest] if rest else []


def split_sentences(text: str) -> list[str]:
    splitter = SentenceSplitter()
    return splitter.feed(text) + splitter.flush()


# Where a sentence ends for a cut: . ! ? or … (closing quotes or brackets after it) before a
# space or the end; or a CJK full stop, exclamation or question mark, with no space after it.
_SENTENCE_END = re.compile(r"[.!?…][\"'”’»)\]]*(?=\s|\Z)|[。！？][」』”’]*")


def cut_reply(text: str, limit: int, *, words: bool = True) -> str:
    """``text`` in at most ``limit`` characters: whole when it fits; else its start up to the
    last sentence end that fits (an abbreviation like "Dr." is none); with none, up to the last
    whole word that fits (``words``; a first word longer than ``limit`` is cut at ``limit``),
    or ``""`` (not ``words``)."""
    if len(text) <= limit:
        return text
    head = text[:limit + 1]  # one character more: what follows a mark at the limit
    ends = [m.end() for m in _SENTENCE_END.finditer(head)
            if m.end() <= limit and text[:m.end()].split()[-1].lower() not in _ABBREVIATIONS]
    if ends and (cut := text[:ends[-1]].rstrip()):
        return cut
    if not words:
        return ""
    spaces = [m.start() for m in re.finditer(r"\s", head)]
    cut = text[:spaces[-1]].rstrip() if spaces else ""
    return cut or text[:limit].rstrip()


def ends_sentence(text: str) -> bool:
    """Whether ``text`` ends at a sentence end (as ``cut_reply`` finds them)."""
    return any(m.end() == len(text.rstrip()) for m in _SENTENCE_END.finditer(text.rstrip()))
