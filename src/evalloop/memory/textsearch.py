"""Full-text side of ``find``: the query's words (stop words out, FTS5 syntax made plain), pruned
to the rarest within a postings budget, ranked by BM25 (in NumPy over FTS5's postings)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from evalloop.memory.bm25 import Bm25Index, Phrase, UnreadableIndex

_WORD = re.compile(r"\w+", re.UNICODE)
MAX_TERMS = 32
#: Terms are kept, rarest first, until their document frequencies add up to this (the rarest
#: term is always kept): ranking reads every posting of every kept term.
POSTINGS_BUDGET = 6_000
TOKENIZE = "porter unicode61 remove_diacritics 2"
MAX_CACHED_WORDS = 50_000

# Words too common to help ranking; dropping them keeps OR-queries cheap on large stores.
_STOPWORD_TEXT = """
    a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers herself him himself his how i if in into is it
    its itself just me more most my myself no nor not now of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself yourselves
    """
STOPWORDS = frozenset(_STOPWORD_TEXT.split())


def query_words(text: str) -> list[str]:
    """Distinct lower-cased words of ``text``, stop words dropped unless nothing else is left."""
    words = list(dict.fromkeys(_WORD.findall(text.lower())))
    return ([w for w in words if w not in STOPWORDS] or words)[:MAX_TERMS]


def quoted_or(words: Sequence[str]) -> str:
    """``"a" OR "b"``: quoting makes FTS5 syntax in user text plain words."""
    return " OR ".join(f'"{w}"' for w in words)


def match_expression(text: str) -> str | None:
    """An FTS5 query that ORs the distinct words of ``text``, each as a quoted string.

    Quoting makes FTS5 syntax in user text (``AND``, ``NEAR``, ``*``, ``"``, ``:``, ``-``) plain
    words. Stop words are dropped unless nothing else is left. None when there are no words.
    """
    words = query_words(text)
    return quoted_or(words) if words else None


class TextSearcher:
    """BM25 search over the ``memory_fts`` table of one connection.

    Document frequencies (read from ``fts5vocab``, which counts a term's whole posting list)
    are cached per stem until the file changes: the store calls :meth:`invalidate` after its
    writes, and ``PRAGMA data_version`` shows other connections' writes. Stems are cached per
    word for good.
    """

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS memory_fts_vocab USING fts5vocab(memory_fts, row)")
        conn.execute(f"CREATE VIRTUAL TABLE temp.query_words USING fts5(w, tokenize='{TOKENIZE}')")
        conn.execute("CREATE VIRTUAL TABLE temp.query_stems USING fts5vocab(temp, query_words, instance)")
        self.bm25 = Bm25Index(conn)
        self._numpy_bm25 = True
        self._stems: dict[str, tuple[str, ...]] = {}
        self._df: dict[str, tuple[int, int]] = {}  # term: (rows holding it, occurrences)
        self._version: int | None = None

    def invalidate(self, from_pk: int = 0) -> None:
        """Forget cached document frequencies and the lengths of rows from ``from_pk`` on
        (this connection wrote or deleted them)."""
        self._df = {}
        self.bm25.changed(from_pk)

    def removed(self) -> None:
        """Forget cached document frequencies: this connection deleted memories."""
        self._df = {}
        self.bm25.removed()

    def _stems_of(self, words: list[str]) -> list[tuple[str, ...]]:
        """The FTS5 terms each word becomes (the same stemming the index applies)."""
        new = [w for w in dict.fromkeys(words) if w not in self._stems]
        if new:
            self.conn.execute("DELETE FROM temp.query_words")
            self.conn.executemany("INSERT INTO temp.query_words(rowid, w) VALUES (?, ?)", list(enumerate(new)))
            stems: dict[int, set[str]] = {}
            for term, doc in self.conn.execute("SELECT term, doc FROM temp.query_stems"):
                stems.setdefault(doc, set()).add(term)
            if len(self._stems) > MAX_CACHED_WORDS:
                self._stems = {}
            self._stems.update((w, tuple(sorted(stems.get(i, ())))) for i, w in enumerate(new))
        return [self._stems[w] for w in words]

    def _document_frequencies(self, stems: list[tuple[str, ...]]) -> list[int]:
        """How many memories contain each word, given as the FTS5 terms it stems to."""
        (version,) = self.conn.execute("PRAGMA data_version").fetchone()
        if version != self._version or len(self._df) > MAX_CACHED_WORDS:
            self._df, self._version = {}, version
        df = self._df
        for term in {t for group in stems for t in group if t not in df}:
            row = self.conn.execute("SELECT doc, cnt FROM memory_fts_vocab WHERE term = ?", (term,)).fetchone()
            df[term] = (row[0], row[1]) if row else (0, 0)
        return [max((df[t][0] for t in group), default=0) for group in stems]

    def _kept(self, text: str) -> list[tuple[str, tuple[str, ...]]]:
        """The query's rarest words within the postings budget, with their FTS5 terms."""
        words = query_words(text)
        if not words:
            return []
        stems = self._stems_of(words)
        freqs = self._document_frequencies(stems)
        ranked = sorted((f, i, w) for i, (w, f) in enumerate(zip(words, freqs, strict=True)) if f)
        kept: list[tuple[str, tuple[str, ...]]] = []
        total = 0
        for freq, i, word in ranked:
            if kept and total + freq > POSTINGS_BUDGET:
                break
            kept.append((word, stems[i]))
            total += freq
        return kept

    def _phrases(self, kept: list[tuple[str, tuple[str, ...]]]) -> list[Phrase] | None:
        """The kept words as single-term phrases; None if FTS5 splits one into several terms."""
        if any(len(terms) != 1 for _, terms in kept):
            return None
        return [Phrase(t, w, self._df[t][1] > self._df[t][0]) for w, (t,) in kept]

    def expression(self, text: str) -> str | None:
        """The MATCH expression for ``text``: its rarest words within the postings budget."""
        kept = self._kept(text)
        return _match(kept) if kept else None

    def search(self, text: str, limit: int, allowed: Sequence[int] | None = None) -> list[int]:
        """Memory pks best first by BM25 (only ``allowed`` ones if given). Scored in NumPy
        (:class:`Bm25Index`) when every kept word is one FTS5 term; a word FTS5 splits into
        a phrase (``foo_bar``) goes through FTS5's own ``ORDER BY rank``."""
        return self.search_covered(text, limit, allowed)[0]

    def search_covered(self, text: str, limit: int,
                       allowed: Sequence[int] | None = None) -> tuple[list[int], float | None]:
        """:meth:`search`, and how much of the query the best lexical match covers: the share
        of the query words' IDF mass (words no memory holds count fully) held by the returned
        memory that holds the most. ``None`` when FTS5 ranked the query itself."""
        kept = self._kept(text)
        if not kept:
            return [], 0.0
        phrases = self._phrases(kept) if self._numpy_bm25 else None
        if phrases is not None:
            try:
                pks, matched = self.bm25.top_covered(phrases, limit, allowed)
                return pks, matched / self._query_mass(text) if pks else 0.0
            except UnreadableIndex:  # not the layout read here: FTS5 ranks (or says what is damaged)
                self._numpy_bm25 = False
        sql = "SELECT rowid FROM memory_fts WHERE memory_fts MATCH ?"
        params: list[Any] = [_match(kept)]
        if allowed is not None:  # ``+rowid``: FTS5 does not re-run the match per row
            sql += " AND +rowid IN (SELECT value FROM json_each(?))"
            params.append(json.dumps([int(pk) for pk in allowed]))
        rows = self.conn.execute(sql + " ORDER BY rank LIMIT ?", [*params, limit])
        return [r[0] for r in rows], None

    def _query_mass(self, text: str) -> float:
        """The summed IDF of every query word (stop words out), whether or not it was kept."""
        words = query_words(text)
        freqs = self._document_frequencies(self._stems_of(words))
        return sum(self.bm25.idf(f) for f in freqs) or 1.0


def _match(kept: list[tuple[str, tuple[str, ...]]]) -> str:
    """The MATCH expression of the kept words (see :meth:`TextSearcher._kept`)."""
    return quoted_or([word for word, _ in kept])
