"""The command language as text: the tools' example templates expanded into spoken sentences.

An offline recognizer learns what people ask from these lines (``<s>``/``</s>`` mark where a
request starts and ends). Slots with likely values (see ``vocabulary``) are filled with a
sample of them; a free-text slot cuts the sentence, so the words around it are learned and
the free text itself is left to the recognizer's general vocabulary.
"""

from __future__ import annotations

import itertools
import logging
import math
import random
import re
from collections.abc import Iterator
from typing import Any

from hassil import sample_expression
from hassil.parse_expression import parse_sentence

from workers.intents.matcher import IntentMatcher
from workers.intents.vocabulary import spoken_values

log = logging.getLogger(__name__)

START, END = "<s>", "</s>"
_SLOT = re.compile(r"\{([^}]+)\}")
_NOT_WORD = re.compile(r"[^a-z' ]+")


def spoken(text: str) -> str:
    """Lower case words only (apostrophes kept), as a recognizer writes them."""
    return " ".join(_NOT_WORD.sub(" ", text.lower()).split())


def command_lines(
    matcher: IntentMatcher, *, per_sentence: int = 300, pairs: int = 300, seed: int = 0
) -> list[str]:
    """Corpus lines for a command language model, deterministic for a given seed."""
    rng = random.Random(seed)
    lines: list[str] = []
    whole: list[str] = []
    values_seen: set[tuple[str, ...]] = set()
    for name in sorted(matcher.tools):
        fields = matcher.tools[name].args_model.model_fields
        for template in matcher.templates[name]:
            for sentence in _expansions(template):
                parts = _SLOT.split(sentence)  # text, slot, text, slot, ..., text
                slots = [p.split(":")[-1] for p in parts[1::2]]
                vocab = [
                    spoken_values(s, fields[s].annotation) if s in fields else None for s in slots
                ]
                for values in vocab:
                    if values and values not in values_seen:
                        values_seen.add(values)
                        lines.extend(spoken(v) for v in values)
                new = list(_fill(parts, vocab, per_sentence, rng))
                lines.extend(new)
                whole.extend(line for line in new if line.startswith(START) and line.endswith(END))
    for _ in range(pairs if len(whole) > 1 else 0):
        first, second = rng.sample(whole, 2)
        lines.append(f"{first[: -len(END)]}and{second[len(START) :]}")
    return [line for line in lines if line.strip()]


def _expansions(template: str) -> Iterator[str]:
    try:
        yield from sample_expression(parse_sentence(template).expression, expand_lists=False)
    except Exception as exc:  # hassil raises several unrelated error types
        log.warning("cannot expand %r: %s", template, exc)


def _fill(
    parts: list[str], vocab: list[tuple[str, ...] | None], limit: int, rng: random.Random
) -> Iterator[str]:
    """Lines for one expanded sentence: its slots filled, cut at each free-text slot."""
    pieces: list[list[Any]] = [[]]  # runs of text and fillable slots between free slots
    for i, part in enumerate(parts):
        if i % 2 == 0:
            pieces[-1].append(spoken(part))
        elif vocab[i // 2] is None:
            pieces.append([])
        else:
            pieces[-1].append(vocab[i // 2])
    for n, piece in enumerate(pieces):
        head = START if n == 0 else ""
        tail = END if n == len(pieces) - 1 else ""
        for words in _combinations(piece, limit, rng):
            text = " ".join(w for w in words if w)
            if text or (head and tail):
                yield " ".join(x for x in (head, text, tail) if x)


def _combinations(piece: list[Any], limit: int, rng: random.Random) -> Iterator[list[str]]:
    """Every fill of the piece's slots, or ``limit`` of them (covering each value if it can)."""
    options = [[p] if isinstance(p, str) else [spoken(v) for v in p] for p in piece]
    total = math.prod(len(o) for o in options)
    if total <= limit:
        yield from (list(c) for c in itertools.product(*options))
        return
    widest = max(len(o) for o in options)
    for k in range(limit):
        if widest <= limit and k < widest:
            yield [o[k % len(o)] for o in options]
        else:
            yield [rng.choice(o) for o in options]
