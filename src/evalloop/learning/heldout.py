"""Held-out cases and failure memories: which cases an incident may show, an incident read
without the held-out ones, and what of a held-out case is redacted from a learn case's output.

The split itself is the suite's (:mod:`evalloop.suites.split`). The lifecycle
(:mod:`evalloop.learning.incidents`) never remembers a held-out case; injection
(:mod:`evalloop.learning.injection`) never injects an incident that shows one. Both read
:func:`remembered` and :func:`without_held_out`, so "what an incident may show" has one
definition. A learn case's output or scorer reason may still quote a held-out case (a target
that answers one question with another's answer): :class:`Redactor` removes that before the
lesson text is built (:func:`evalloop.learning.feedback.failing_cases`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

from evalloop.learning.incident_records import meta

if TYPE_CHECKING:
    from evalloop.memory.records import MemoryRecord
    from evalloop.suites.models import Case


def remembered(record: MemoryRecord) -> set[str]:
    """Every case an incident's text or corrections may show: its remembered cases
    (``failing_cases``), the cases its text shows (``still_failing``) and its corrections' cases
    (:meth:`~evalloop.learning.incident_records.IncidentMeta.shown`; none for another memory)."""
    m = meta(record)
    return m.shown() if m is not None else set()


def without_held_out(record: MemoryRecord, held: Collection[str]) -> MemoryRecord:
    """A stored incident as the lifecycle reads it: held-out cases dropped from what it remembers
    (an incident written before the split, or under another one). When its text may show one,
    ``rewrite`` is set: the next update writes the text again from learn cases."""
    m = meta(record)
    if not held or m is None:
        return record
    drop = set(held)
    update: dict[str, object] = {
        "failing_cases": [c for c in m.failing_cases if c not in drop],
        "chronic_cases": [c for c in m.chronic_cases if c not in drop],
        "corrections": [c for c in m.corrections if c.get("id") not in drop]}
    if m.shown() & drop:
        update["rewrite"] = True
    clean = m.model_copy(update=update).model_dump(mode="json", include=set(update))
    return record.model_copy(update={"metadata": {**record.metadata, **clean}})


REDACTED = "[held-out]"
#: a held-out string shorter than this is not redacted: a label or a small number names no case
MIN_SECRET_CHARS = 4
#: nor one longer than this (a whole document: a lesson quotes at most 200 characters of anything)
MAX_SECRET_CHARS = 2000


def _texts(value: object) -> Iterator[str]:
    """The strings of a case's input or expected answer a lesson could quote: the value itself when
    it is text, else its string and number leaves."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _texts(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _texts(item)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        yield str(value)


def _folded(text: str) -> str:
    return " ".join(text.split()).casefold()


_TOKEN = re.compile(r"\w+")


class Redactor:
    """Removes what only held-out cases say from a learn case's output or scorer reason before a
    lesson stores it: every string (or number) of a held-out case's input and expected answer of
    :data:`MIN_SECRET_CHARS` to :data:`MAX_SECRET_CHARS` characters that no learn case's input or
    expected answer also holds, matched case-insensitively, across any whitespace, as a whole word
    where it starts or ends with one; each becomes :data:`REDACTED`.

    Each string is indexed by its rarest word, and a text is matched only against the strings
    whose every word it contains (a suite with many held-out cases costs little per text)."""

    def __init__(self, held: Iterable[Case], learn: Iterable[Case]) -> None:
        public = {_folded(t) for case in learn for t in (*_texts(case.input), *_texts(case.expected))}
        secrets = {_folded(t) for case in held for t in (*_texts(case.input), *_texts(case.expected))}
        kept = [(s, frozenset(_TOKEN.findall(s))) for s in secrets - public
                if MIN_SECRET_CHARS <= len(s) <= MAX_SECRET_CHARS]
        often = Counter(w for _, words in kept for w in words)
        self._by_word: dict[str, list[tuple[str, frozenset[str]]]] = {}
        for secret, words in kept:
            key = min(words, key=lambda w: (often[w], w)) if words else ""
            self._by_word.setdefault(key, []).append((secret, words))
        self.secrets = len(kept)

    @classmethod
    def of(cls, cases: Iterable[Case], held: Collection[str]) -> Redactor:
        """The redactor of a suite's cases split into ``held`` ids and the rest."""
        held_cases: list[Case] = []
        learn_cases: list[Case] = []
        for case in cases:
            (held_cases if case.id in held else learn_cases).append(case)
        return cls(held_cases, learn_cases)

    def __call__(self, text: str | None) -> str | None:
        if not text or not self._by_word:
            return text
        words = {"", *_TOKEN.findall(text.casefold())}
        found = {s for w in words for s, needs in self._by_word.get(w, ()) if needs <= words}
        if not found:
            return text
        ordered = sorted(found, key=lambda s: (-len(s), s))  # the longest first: a string inside another
        return re.compile("|".join(map(_word, ordered)), re.IGNORECASE).sub(REDACTED, text)


def _word(secret: str) -> str:
    body = r"\s+".join(map(re.escape, secret.split(" ")))
    return (r"(?<!\w)" if secret[:1].isalnum() else "") + body + (r"(?!\w)" if secret[-1:].isalnum() else "")
