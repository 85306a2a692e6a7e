"""BM25 over FTS5's own postings, scored in NumPy: the formula and statistics of FTS5's
``bm25()`` (k1 = 1.2, b = 0.75, its IDF floor of 1e-6, ties by rowid), without its per-row cost.

``ORDER BY rank`` makes FTS5 call ``bm25()`` once per matching row, and each call reads that
row's length from ``%_docsize`` with a nested statement: about 1.5 µs a row, 6–8 ms for one
term in 4,000 of 100,000 memories, which doubled under load. Here a term's postings come back
in one string (``group_concat`` over an ``fts5vocab`` instance table), the row lengths from an
array kept in process (read from ``%_docsize`` once, then only the rows written since), and
the scoring is a handful of vector operations: under a millisecond for the same term.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

K1 = 1.2
B = 0.75
IDF_FLOOR = 1e-6


def read_varint(blob: bytes, pos: int = 0) -> tuple[int, int]:
    """The SQLite variable-length integer at ``pos`` (the encoding FTS5's shadow tables use)
    and the position after it."""
    value = 0
    for i in range(8):
        byte = blob[pos + i]
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value, pos + i + 1
    return (value << 8) | blob[pos + 8], pos + 9


def read_varints(data: bytes) -> np.ndarray:
    """Every SQLite varint in ``data``, back to back (int64; values below 2**56, where the
    last byte of each is the first without its high bit), decoded without a Python loop."""
    raw = np.frombuffer(data, dtype=np.uint8)
    ends = np.flatnonzero(raw < 0x80)
    starts = np.concatenate(([0], ends[:-1] + 1)).astype(np.int64)
    values = np.zeros(ends.size, dtype=np.int64)
    for k in range(int((ends - starts).max(initial=-1)) + 1):  # byte k of each varint
        pos = starts + k
        more = pos <= ends
        values[more] = (values[more] << 7) | (raw[pos[more]] & 0x7F)
    return values


def int_list(text: str | None) -> np.ndarray:
    """The integers of a ``group_concat`` (comma-separated), as int64, without a Python object
    a row (an empty array for NULL or "")."""
    return np.fromstring(text, dtype=np.int64, sep=",") if text else np.zeros(0, dtype=np.int64)


class UnreadableIndex(Exception):
    """FTS5's shadow tables are not laid out as this module reads them."""


class Phrase(NamedTuple):
    """One query phrase of a single FTS5 term: the term, the query word it came from, and
    whether any row holds the term more than once (if not, the term's rows come from a plain
    MATCH, which skips reading positions, and every row's frequency is 1)."""

    term: str
    word: str
    repeats: bool = True


class Bm25Index:
    """Scores FTS5 postings of the one-column table ``table`` (with ``%_docsize``) in NumPy.

    Row lengths are cached by rowid. The owner calls :meth:`changed` with the smallest rowid
    its write touched (rowids are never reused below it); writes from other connections show
    in ``PRAGMA data_version`` and reload every length.
    """

    def __init__(self, conn: Any, table: str = "memory_fts") -> None:
        self.conn = conn
        self.table = table
        self._instances = f"temp.{table}_instances"
        conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {self._instances} USING fts5vocab(main, {table}, instance)")
        self._lengths = np.zeros(0, dtype=np.int32)
        self._stale_from: int | None = 0
        self._version: int | None = None
        self._rows = 0
        self._tokens = 0

    def changed(self, from_rowid: int) -> None:
        """Rows from ``from_rowid`` on were written or deleted by this connection."""
        self._stale_from = from_rowid if self._stale_from is None else min(self._stale_from, from_rowid)

    def removed(self) -> None:
        """Rows were deleted by this connection: no other row's length changed, and a deleted
        rowid comes back only as the next insert's (which :meth:`changed` covers), so only the
        averages are read again, not every length from the deleted row on."""
        self.changed(len(self._lengths))

    def _refresh(self) -> None:
        (version,) = self.conn.execute("PRAGMA data_version").fetchone()
        if version != self._version:
            self._version, self._stale_from = version, 0
        if self._stale_from is None:
            return
        start = self._stale_from
        # two strings instead of a Python object per row: the ids, and the one-column
        # %_docsize entries (one varint each) back to back in hex
        ids_text, sizes_hex = self.conn.execute(
            f"SELECT group_concat(id), group_concat(hex(sz), '') FROM {self.table}_docsize WHERE id >= ?", (start,)
        ).fetchone()
        ids = int_list(ids_text)
        sizes = read_varints(bytes.fromhex(sizes_hex or ""))
        if sizes.size != ids.size:  # not one varint a row: not the layout this reads
            raise UnreadableIndex(f"{self.table}_docsize holds {sizes.size} sizes for {ids.size} rows")
        top = int(ids.max()) + 1 if ids.size else start
        if start == 0:
            self._lengths = np.zeros(top, dtype=np.int32)
        elif top > len(self._lengths):
            self._lengths = np.concatenate([self._lengths, np.zeros(top - len(self._lengths), dtype=np.int32)])
        self._lengths[ids] = sizes
        # the averages record (id 1 of %_data): rows in the index, then tokens per column
        block = self.conn.execute(f"SELECT block FROM {self.table}_data WHERE id = 1").fetchone()
        self._rows, self._tokens = 0, 0
        if block is not None and block[0]:
            self._rows, pos = read_varint(block[0])
            self._tokens = read_varint(block[0], pos)[0] if pos < len(block[0]) else 0
        self._stale_from = None

    def _lengths_of(self, rowids: np.ndarray) -> np.ndarray:
        if int(rowids.max()) >= len(self._lengths):  # another connection wrote since the refresh
            self._version = None
            self._refresh()
        return self._lengths[np.minimum(rowids, len(self._lengths) - 1)]

    def _postings(self, phrase: Phrase) -> tuple[np.ndarray, np.ndarray]:
        """The rows holding ``phrase``'s term, ascending, and how often each holds it."""
        if phrase.repeats:  # one rowid per occurrence
            sql, arg = f"SELECT group_concat(doc) FROM {self._instances} WHERE term = ?", phrase.term
        else:
            sql, arg = f"SELECT group_concat(rowid) FROM {self.table} WHERE {self.table} MATCH ?", f'"{phrase.word}"'
        (text,) = self.conn.execute(sql, (arg,)).fetchone()
        rowids = int_list(text)
        if phrase.repeats:
            return np.unique(rowids, return_counts=True)
        return rowids, np.ones(rowids.size, dtype=np.int64)

    def idf(self, df: int) -> float:
        """FTS5's IDF of a term in ``df`` rows (floored at 1e-6); a term no row holds gets the
        IDF of one held by none (the most informative)."""
        value = math.log((self._rows - df + 0.5) / (df + 0.5)) if self._rows > 0 else 0.0
        return value if value > 0.0 else IDF_FLOOR

    def scores(self, phrases: Sequence[Phrase]) -> tuple[np.ndarray, np.ndarray]:
        """(rowids, BM25 scores, higher is better) of the rows holding any of the ``phrases``,
        summed in the given order as FTS5 does."""
        rowids, scores, _ = self.scored(phrases)
        return rowids, scores

    def scored(self, phrases: Sequence[Phrase]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """As :meth:`scores`, with each row's matched IDF mass (the sum of the IDFs of the
        phrases it holds): how much of the query's information a row covers."""
        self._refresh()
        if self._rows <= 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(0)
        avgdl = self._tokens / self._rows
        docs_per_term: list[np.ndarray] = []
        parts: list[np.ndarray] = []
        idfs: list[float] = []
        for phrase in phrases:
            docs, tf = self._postings(phrase)
            if not docs.size:
                continue
            idf = self.idf(docs.size)
            norm = K1 * (1 - B + B * self._lengths_of(docs) / avgdl)
            docs_per_term.append(docs)
            parts.append(idf * ((tf * (K1 + 1.0)) / (tf + norm)))
            idfs.append(idf)
        if not parts:
            return np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(0)
        if len(parts) == 1:
            return docs_per_term[0], parts[0], np.full(docs_per_term[0].size, idfs[0])
        rowids, where = np.unique(np.concatenate(docs_per_term), return_inverse=True)
        mass = np.repeat(np.asarray(idfs), [d.size for d in docs_per_term])
        return (rowids, np.bincount(where, weights=np.concatenate(parts), minlength=rowids.size),
                np.bincount(where, weights=mass, minlength=rowids.size))

    def top(self, phrases: Sequence[Phrase], limit: int, allowed: Sequence[int] | None = None) -> list[int]:
        """The ``limit`` best rowids for ``phrases`` (only ``allowed`` ones if given), best
        first, ties by rowid as FTS5's ``ORDER BY rank`` breaks them."""
        return self.top_covered(phrases, limit, allowed)[0]

    def top_covered(self, phrases: Sequence[Phrase], limit: int,
                    allowed: Sequence[int] | None = None) -> tuple[list[int], float]:
        """:meth:`top`, and the largest matched IDF mass among the rows returned."""
        rowids, scores, mass = self.scored(phrases)
        if allowed is not None and rowids.size:
            largest = int(rowids.max())
            mask = np.zeros(largest + 1, dtype=bool)
            wanted = np.asarray(allowed, dtype=np.int64)
            mask[wanted[(wanted >= 0) & (wanted <= largest)]] = True
            keep = mask[rowids]
            rowids, scores, mass = rowids[keep], scores[keep], mass[keep]
        if limit <= 0 or not rowids.size:
            return [], 0.0
        if rowids.size > limit:  # only rows scoring at least the limit-th best can be in the top
            cut = np.partition(scores, rowids.size - limit)[rowids.size - limit]
            keep = scores >= cut
            rowids, scores, mass = rowids[keep], scores[keep], mass[keep]
        order = np.lexsort((rowids, -scores))[:limit]
        return rowids[order].tolist(), float(mass[order].max())
