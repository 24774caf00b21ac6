"""Markdown to sentences a person would say, as the text streams.

Models write markdown even when asked not to. Read aloud as is, a reply says "asterisk",
"hashtag" and whole URLs. This filter turns each line into plain speech before the reply is cut
into sentences: headings, list items and table rows become sentences of their own (a full stop
is added where the line has none), emphasis and code marks are dropped (their words stay), a
link becomes its text, a bare URL its site ("example dot com"), an image its alt text, and a
fenced code block nothing. Emoji are dropped.

Text is passed on as soon as nothing in it can still change: only an unfinished link, URL or
line marker is held back, so speech starts as early as before.
"""

from __future__ import annotations

import re
import unicodedata

# A list item's or heading's marker ("1.", "-", "•", "##").
_MARKER = r"(?:\d{1,3}[.)]|#{1,6}|[-*+•◦▪])"
_LINE_MARKERS = re.compile(r"[#>|`~\-*+•◦▪_=\d.)\s]*")
_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^\s*#{1,6}\s+")
_ITEM = re.compile(r"^\s*(?:[-*+•◦▪]|\d{1,3}[.)])\s+")  # a heading's "#" is not an item
_QUOTE = re.compile(r"^\s*(?:>\s?)+")
_RULE = re.compile(r"^\s*(?:(?:-\s*){3,}|(?:\*\s*){3,}|(?:_\s*){3,}|(?:=\s*){3,})$")
_TABLE_SEPARATOR = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(?:\|\s*:?-{2,}:?\s*)*\|?\s*$")

_IMAGE = re.compile(r"!\[([^\]]*)\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_REFERENCE_LINK = re.compile(r"\[([^\]]+)\]\[[^\]]*\]")
_AUTOLINK = re.compile(r"<((?:https?://|www\.)[^>\s]+)>")
_URL = re.compile(r"\b(?:https?://|www\.)[^\s<>()\[\]]+[^\s<>()\[\].,;:!?'\"]")
_TAG = re.compile(r"</?[A-Za-z][^>]*>")
_EMPHASIS = re.compile(r"(\*{1,3}|_{2,3}|~~)")
_WORD_UNDERSCORES = re.compile(r"(?<=\w)_(?=\w)")
_EDGE_UNDERSCORES = re.compile(r"(?<![\w])_+|_+(?![\w])")
_TIMES = re.compile(r"(?<=\d) \* (?=\d)")
_SPACES = re.compile(r"[ \t]{2,}")
# A list marker or heading written on the same line as the sentence before it.
_MARKER_IN_LINE = re.compile(rf"(?<=[.!?:])(\s+){_MARKER}\s+")
_SPACE_BEFORE_MARK = re.compile(r"[ \t]+(?=[.,!?;:](?:\s|$))")

# Where held text starts: an unfinished link or tag, or a last word that may become a URL.
_OPEN_LINK = re.compile(r"!?\[[^\]]*(?:\](?:\([^)]*)?)?$")
_OPEN_TAG = re.compile(r"<[^>\s]*$")
_LAST_WORD = re.compile(r"(\S+)\s*$")
_URL_START = re.compile(
    r"^[(\[<]?(?:h(?:t(?:t(?:p(?:s)?)?)?)?(?::/?/?)?|w{1,3}|(?:https?://|www\.)\S*)$",
    re.IGNORECASE)
_INLINE_MARKER = re.compile(rf"^(?:{_MARKER}|\d{{1,3}})$")  # a number may become "1."
_MARKUP_ONLY = re.compile(r"^[*_~`#\\]+$")
_TRAILING = re.compile(r"[\s,;:]*$")
_ENDS_CLAUSE = re.compile(r"[.!?:]$")
_MARKER_AT_START = re.compile(rf"^\s+{_MARKER}\s+")
_ENDS_SENTENCE = re.compile(r"[.!?…][\"')\]]*$")


def _is_emoji(ch: str) -> bool:
    if ch in "\u200d\ufe0f\ufe0e\u20e3":
        return True
    code = ord(ch)
    if 0x1F3FB <= code <= 0x1F3FF or 0xE0020 <= code <= 0xE007F:  # skin tones, tag letters
        return True
    return unicodedata.category(ch) == "So" and ch not in "°©®℃℉"


def drop_emoji(text: str) -> str:
    return "".join(ch for ch in text if not _is_emoji(ch))


def _site(url: str) -> str:
    """A URL as it is said: its site, dots spoken ("example dot com")."""
    host = re.sub(r"^(?:https?://)?(?:www\.)?", "", url, flags=re.IGNORECASE)
    host = re.split(r"[/?#:]", host, maxsplit=1)[0]
    return " dot ".join(p for p in host.split(".") if p)


def inline(text: str) -> str:
    """One piece of a line without its inline markdown, emoji or URLs."""
    text = _IMAGE.sub(r"\1", text)
    text = _LINK.sub(r"\1", text)
    text = _REFERENCE_LINK.sub(r"\1", text)
    text = _AUTOLINK.sub(lambda m: _site(m.group(1)), text)
    text = _URL.sub(lambda m: _site(m.group(0)), text)
    text = _TAG.sub(" ", text)
    text = _TIMES.sub(" times ", text)
    text = _MARKER_IN_LINE.sub(r"\1", text)
    text = text.replace("`", "").replace("\\", "")
    text = _EMPHASIS.sub("", text)
    text = _WORD_UNDERSCORES.sub(" ", text)
    text = _EDGE_UNDERSCORES.sub("", text)
    text = _SPACE_BEFORE_MARK.sub("", drop_emoji(text))
    return _SPACES.sub(" ", text)


class MarkdownFilter:
    """Feed reply text as it streams; get back the same reply as plain speech so far."""

    def __init__(self) -> None:
        self._raw = ""  # the current line's text not yet passed on
        self._kind: str | None = None  # the current line's kind, once its start is seen
        self._said = ""  # what the current line has given so far
        self._in_fence = False
        self._space = False  # a space is owed before the next word

    def feed(self, text: str) -> str:
        *ended, rest = (self._raw + text).split("\n")
        out: list[str] = []
        for line in ended:  # the current line's rest, then whole lines
            self._raw = line
            out.append(self._end_line())
        self._raw = rest
        out.append(self._partial())
        return "".join(out)

    def holding(self) -> bool:
        """Whether some of the current line's text is held back."""
        return bool(self._raw.strip())

    def release(self) -> str:
        """The stream paused: pass on a last word held only because it may still become a
        list marker or a URL ("…is 156." before "…156. Open"); an unfinished link, tag or
        table row stays held. The line goes on: more text may follow."""
        return self._partial(paused=True)

    def flush(self) -> str:
        """The rest; the last line gets no full stop added (it may be a phrase, not a
        sentence: the TTS worker filters the pieces the agent cut)."""
        return self._end_line(last=True)

    # -- one line ---------------------------------------------------------------------------
    def _classify(self, complete: bool) -> bool:
        """Decide the line's kind once its start can no longer change; strip its marker."""
        if self._kind is not None:
            return True
        raw = self._raw
        if self._in_fence:
            if not complete:
                return False
            self._kind = "fence" if _FENCE.match(raw) else "code"
            return True
        undecided = _LINE_MARKERS.fullmatch(raw) is not None and not raw.endswith(" ")
        if not complete and (undecided or (_FENCE.match(raw) and len(raw.strip()) < 3)):
            return False
        if _FENCE.match(raw):
            self._kind = "fence"
        elif complete and (_RULE.match(raw) or (_TABLE_SEPARATOR.match(raw) and "|" in raw)):
            self._kind = "rule"
        elif m := _HEADING.match(raw):
            self._kind, self._raw = "heading", raw[m.end():]
        elif m := _ITEM.match(raw):
            self._kind, self._raw = "item", raw[m.end():]
        elif m := _QUOTE.match(raw):
            self._kind, self._raw = "para", raw[m.end():]
        elif raw.lstrip().startswith("|"):
            self._kind, self._raw = "table", raw.lstrip()[1:]
        else:
            self._kind = "para"
        return True

    def _partial(self, paused: bool = False) -> str:
        if not self._classify(complete=False) or self._kind in ("fence", "code", "rule"):
            return ""
        hold = len(self._raw)
        for pattern in (_OPEN_LINK, _OPEN_TAG):
            if m := pattern.search(self._raw):
                hold = min(hold, m.start())
        if not paused and (m := _LAST_WORD.search(self._raw[:hold])) and (
                _URL_START.match(m.group(1)) or _MARKUP_ONLY.match(m.group(1))
                or _INLINE_MARKER.match(m.group(1))):
            hold = m.start()
        if self._kind == "table":  # a row is said once its cells are all there
            hold = 0
        # A line's last mark decides how it ends (':' before a list becomes '.'): keep it.
        hold = _TRAILING.search(self._raw[:hold]).start()  # type: ignore[union-attr]
        ready, self._raw = self._raw[:hold], self._raw[hold:]
        return self._say(ready)

    def _end_line(self, last: bool = False) -> str:
        self._classify(complete=True)
        kind, raw = self._kind, self._raw
        self._raw = ""
        if kind == "fence":
            self._in_fence = not self._in_fence
        if kind in ("fence", "code", "rule"):
            self._kind = None
            return ""
        if kind == "table":
            raw = ", ".join(c.strip() for c in raw.rstrip().rstrip("|").split("|") if c.strip())
        text = self._say(raw)
        said, self._said, self._space, self._kind = self._said, "", False, None
        if not said:
            return ""
        if last:
            return text
        if _ENDS_SENTENCE.search(said):
            return text + " "
        # A sentence needs its full stop before the next line starts.
        return text.rstrip(",;:").rstrip() + ". "

    def _say(self, raw: str) -> str:
        if _ENDS_CLAUSE.search(self._said):  # "…how: 1. Open", "…start. ## Tip" on one line
            raw = _MARKER_AT_START.sub(" ", raw)
        text = inline(raw)
        if not self._said:
            text = text.lstrip()
            if self._kind in ("heading", "item", "table") and text:
                text = text[0].upper() + text[1:]
        if not text.strip():  # a space waits for the next word (none before a mark)
            self._space = self._space or (bool(text) and bool(self._said))
            return ""
        if self._space and not text[0].isspace() and text[0] not in ".,!?;:":
            text = " " + text
        said = text.rstrip()
        self._space = len(said) < len(text)
        self._said += said
        return said


def plain(text: str) -> str:
    """A whole text as plain speech."""
    md = MarkdownFilter()
    return _SPACES.sub(" ", md.feed(text) + md.flush()).strip()
