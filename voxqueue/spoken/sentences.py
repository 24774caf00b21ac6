"""Cutting reply text into sentences as it streams, so each is spoken as soon as it is whole."""

from __future__ import annotations

import re

# A sentence ends at . ! ? or … followed by whitespace and a capital or a digit; a number like
# "3.5" does not end one, nor (``_is_abbreviation``) an abbreviation or an initial.
_BOUNDARY = re.compile(r"(?<=[.!?…])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9¿¡])")
_ABBREVIATIONS = frozenset(("mr.", "mrs.", "ms.", "dr.", "st.", "e.g.", "i.e.", "vs.", "etc.",
                            "no."))
# A sentence mark at the very end of the text so far, with any closing quotes or brackets.
_MARK_AT_END = re.compile(r"[.!?…][\"'”’)\]]*\s*$")
# What may still follow a sentence cut at the end of the text: more marks, closing quotes.
_TRAILING = ".!?…\"'”’)]"
#: A stream that pauses this long (seconds) right after a sentence mark has ended its sentence,
#: whatever the word before the mark ("156.", "Dr."): a model pauses there, before a tool call
#: or while it thinks, and never inside a number or a name.
PAUSE_ENDS_SENTENCE_S = 0.3
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
        self._cut_at_end = False  # the last sentence was cut with no character after it yet

    def feed(self, text: str) -> list[str]:
        self._buffer += text
        if self._cut_at_end:  # a mark or closing quote of the sentence already cut
            self._buffer = self._buffer.lstrip(_TRAILING)
            self._cut_at_end = not self._buffer.strip()
        out: list[str] = []
        start = 0
        for match in _BOUNDARY.finditer(self._buffer):
            candidate = self._buffer[start:match.start()].strip()
            if len(candidate) < self.min_chars or _is_abbreviation(candidate):
                continue
            out.append(candidate)
            start = match.end()
        # A sentence whose mark is the last thing that arrived ends now, not when the next
        # sentence begins: a model pauses there (before a tool call, while thinking).
        rest = self._buffer[start:].strip()
        if len(rest) >= self.min_chars and _ends_now(rest):
            out.append(rest)
            start = len(self._buffer)
            self._cut_at_end = True
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

    def holding(self) -> bool:
        """Whether some text is held, not yet cut into a sentence."""
        return bool(self._buffer.strip())

    def held_end(self) -> bool:
        """Whether the text so far stops at a sentence mark that the next character would
        decide ("It is 156." may go on "…156.5"): a pause in the stream now ends it
        (``end_at_pause``), however short ("Sure.": the next sentence may be seconds away)."""
        return _MARK_AT_END.search(self._buffer.strip()) is not None

    def end_at_pause(self) -> list[str]:
        """The stream paused (``PAUSE_ENDS_SENTENCE_S``): the sentence held at its mark is
        whole (nothing, unless ``held_end``)."""
        if not self.held_end():
            return []
        rest, self._buffer = self._buffer.strip(), ""
        self._cut_at_end = self._emitted = True
        return [rest]

    def flush(self) -> list[str]:
        rest, self._buffer = self._buffer.strip(), ""
        if self._cut_at_end:
            rest = rest.lstrip(_TRAILING).strip()
        return [rest] if rest else []


def _last_word(text: str) -> str:
    words = text.split()
    return words[-1].lstrip("\"'“‘([").lower() if words else ""


def _is_abbreviation(sentence: str) -> bool:
    """Whether the sentence's last word is an abbreviation ("Dr.") or an initial ("F."), not
    a sentence's end; a word that merely ends like one ("west.", "items.", "piano.") is not."""
    word = _last_word(sentence)
    return word in _ABBREVIATIONS or (len(word) == 2 and word[0].isalpha())


def _ends_now(text: str) -> bool:
    """Whether ``text``, which stops at a sentence mark, is a whole sentence before the next
    character arrives: ``!``, ``?`` and ``…`` always; a full stop after a word of two letters
    or more that is no abbreviation. After a number ("3." may become "3.5"), an initial, or a
    dotted word ("e.g.", "U.S."), the next character decides."""
    mark = _MARK_AT_END.search(text)
    if mark is None:
        return False
    if text[mark.start()] != ".":
        return True
    word = _last_word(text[:mark.start() + 1])
    return (len(word) >= 3 and word[:-1].isalpha() and "." not in word[:-1]
            and word not in _ABBREVIATIONS)


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
