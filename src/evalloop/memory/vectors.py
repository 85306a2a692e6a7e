"""Vector search over the stored float32 embeddings: sqlite-vec (binary-quantised KNN, then
exact rescoring) or, by default, NumPy: an exact matrix product on small stores, and above
``PREFILTER_FROM`` vectors a sign-bit Hamming prefilter with exact rescoring of a wide pool.

Both read the same source of truth, the ``memory_vectors`` table (rowid → float32 blob), so a
file written on one path can be searched on the other.

:func:`normalise_rows` is the one row normalisation every embedder (local or HTTP) returns through.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, Protocol

import numpy as np

Backend = Literal["sqlite-vec", "numpy"]
Hit = tuple[int, float]  # (rowid, cosine similarity)

#: With a tag filter this small or smaller, score the allowed rows exactly instead of KNN.
EXACT_FILTER_LIMIT = 4096
#: Binary-quantised KNN fetches this many candidates per wanted hit (at least MIN_KNN) before
#: exact rescoring; vec0's KNN cost grows with k, so this trades recall for latency.
OVERSAMPLE = 6
MIN_KNN = 100
_VEC0_MAX_K = 4096
#: The NumPy path scans every float32 row exactly up to this many vectors; above, it ranks
#: rows by sign-bit Hamming distance and rescores the nearest RESCORE (at least
#: RESCORE_PER_HIT per wanted hit) exactly: a 100,000-row scan reads 3 MB instead of 100 MB.
#: bench/memory_bench.py measures its recall@10 against exact search (1.000 on its corpus).
PREFILTER_FROM = 20_000
RESCORE = 2_000
RESCORE_PER_HIT = 100
_POPCOUNT = np.array([bin(i).count("1") for i in range(256)], dtype=np.uint16)
_WORD_POPCOUNT = hasattr(np, "bitwise_count")  # NumPy >= 2


def normalise_rows(vectors: Any) -> np.ndarray:
    """float32 copy of ``vectors`` (2-D) with every non-zero row scaled to unit length."""
    arr = np.asarray(vectors, dtype=np.float32)
    if arr.ndim == 1:
        arr = arr[None, :]
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.ascontiguousarray(arr / norms, dtype=np.float32)


def sign_bits(vectors: np.ndarray) -> np.ndarray:
    """One bit per dimension (positive or not), packed: shape (n, ceil(dim / 8)), uint8."""
    return np.packbits(vectors > 0, axis=1)


def bit_columns(bits: np.ndarray) -> np.ndarray:
    """Packed sign bits (n, bytes) stored column by column, (words, n): 64-bit words where
    NumPy can count their bits, else bytes. Each column is then read in one contiguous pass;
    a row-major (n, 4) table is read with a stride, about three times slower."""
    bits = np.ascontiguousarray(bits, dtype=np.uint8)
    if bits.shape[1] % 8 == 0 and _WORD_POPCOUNT:
        bits = bits.view(np.uint64)
    return np.ascontiguousarray(bits.T)


def row_bits(columns: np.ndarray) -> np.ndarray:
    """The packed rows (n, bytes) back from :func:`bit_columns`."""
    return np.ascontiguousarray(columns.T).view(np.uint8)


def hamming(columns: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Differing bits between each stored row (``columns``, from :func:`bit_columns`) and the
    query's words (``bit_columns`` of its one row, flattened), as uint16."""
    total = np.zeros(columns.shape[1], dtype=np.uint16)
    scratch = np.empty(columns.shape[1], dtype=columns.dtype)
    for column, word in zip(columns, query, strict=True):
        np.bitwise_xor(column, word, out=scratch)
        total += np.bitwise_count(scratch) if _WORD_POPCOUNT else _POPCOUNT[scratch]
    return total


def nearest(distance: np.ndarray, wanted: int) -> np.ndarray:
    """Positions of the ``wanted`` smallest distances, and any tied with the last of them
    (a histogram of the small integer distances finds the cut; cheaper than a partition)."""
    cumulative = np.cumsum(np.bincount(distance))
    cut = int(np.searchsorted(cumulative, wanted))
    return np.flatnonzero(distance <= cut)


def similarities(rows: np.ndarray, query: np.ndarray) -> np.ndarray:
    """``rows @ query`` in NumPy's own loop (``einsum``), never through BLAS: OpenBLAS hands a
    product this small to its worker threads, and on a busy 2-core machine the hand-off took
    ≈ 8 ms where the product itself takes 0.1 ms."""
    return np.einsum("ij,j->i", rows, query)


def _top(rowids: np.ndarray, scores: np.ndarray, k: int) -> list[Hit]:
    if k <= 0 or scores.size == 0:
        return []
    part = np.argpartition(-scores, k - 1)[:k] if scores.size > k else np.arange(scores.size)
    order = part[np.argsort(-scores[part], kind="stable")]
    return [(int(rowids[i]), float(scores[i])) for i in order if np.isfinite(scores[i])]


def exact_scores(conn: Any, rowids: Sequence[int], query: np.ndarray, k: int) -> list[Hit]:
    """Exact cosine top-k among ``rowids``, reading their vectors from ``memory_vectors``."""
    found: list[int] = []
    blobs: list[bytes] = []
    ids = list(rowids)
    for start in range(0, len(ids), 900):  # stay under SQLite's parameter limit
        chunk = ids[start : start + 900]
        marks = ",".join("?" * len(chunk))
        for rowid, blob in conn.execute(f"SELECT rowid, embedding FROM memory_vectors WHERE rowid IN ({marks})", chunk):
            found.append(rowid)
            blobs.append(blob)
    if not found:
        return []
    matrix = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(found), -1)
    return _top(np.asarray(found), similarities(matrix, query), k)


class VectorIndex(Protocol):
    """Search structure kept beside ``memory_vectors``; the store calls it in its transactions."""

    backend: Backend

    def add(self, rowids: Sequence[int], vectors: np.ndarray) -> None: ...

    def remove(self, rowids: Sequence[int]) -> None: ...

    def search(self, query: np.ndarray, k: int, allowed: Sequence[int] | None) -> list[Hit]: ...


class SqliteVecIndex:
    """A vec0 table of sign bits (``bit[dim]``): Hamming KNN, then exact cosine rescoring."""

    backend: Backend = "sqlite-vec"

    def __init__(self, conn: Any, dim: int) -> None:
        self.conn = conn
        self.dim = dim
        conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS memory_vec_bits USING vec0(embedding bit[{dim}])")
        self._reconcile()

    def _reconcile(self) -> None:
        """Bring the bit index in line with ``memory_vectors`` (written by a NumPy-path run)."""
        (n_vec,) = self.conn.execute("SELECT count(*) FROM memory_vectors").fetchone()
        (n_bit,) = self.conn.execute("SELECT count(*) FROM memory_vec_bits").fetchone()
        if n_vec == n_bit:
            return
        self.conn.execute("BEGIN")
        self.conn.execute("DELETE FROM memory_vec_bits WHERE rowid NOT IN (SELECT rowid FROM memory_vectors)")
        self.conn.execute(
            "INSERT INTO memory_vec_bits(rowid, embedding) "
            "SELECT rowid, vec_quantize_binary(embedding) FROM memory_vectors "
            "WHERE rowid NOT IN (SELECT rowid FROM memory_vec_bits)"
        )
        self.conn.execute("COMMIT")

    def add(self, rowids: Sequence[int], vectors: np.ndarray) -> None:
        self.conn.executemany(
            "INSERT INTO memory_vec_bits(rowid, embedding) VALUES (?, vec_quantize_binary(?))",
            [(int(r), v.tobytes()) for r, v in zip(rowids, vectors, strict=True)],
        )

    def remove(self, rowids: Sequence[int]) -> None:
        self.conn.executemany("DELETE FROM memory_vec_bits WHERE rowid = ?", [(int(r),) for r in rowids])

    def search(self, query: np.ndarray, k: int, allowed: Sequence[int] | None) -> list[Hit]:
        if allowed is not None:
            allowed = np.asarray(allowed, dtype=np.int64).tolist()  # Python ints, for SQLite
        if allowed is not None and len(allowed) <= EXACT_FILTER_LIMIT:
            return exact_scores(self.conn, allowed, query, k)
        wanted = k * OVERSAMPLE
        allowed_set = set(allowed) if allowed is not None else None
        if allowed is not None:
            (total,) = self.conn.execute("SELECT count(*) FROM memory_vectors").fetchone()
            wanted = int(wanted * total / max(len(allowed), 1))
        knn_k = min(max(wanted, MIN_KNN), _VEC0_MAX_K)
        rows = self.conn.execute(
            "SELECT rowid FROM memory_vec_bits WHERE embedding MATCH vec_quantize_binary(?) AND k = ?",
            (query.astype(np.float32).tobytes(), knn_k),
        ).fetchall()
        candidates = [r for (r,) in rows if allowed_set is None or r in allowed_set]
        if allowed is not None and len(candidates) < k and len(rows) == knn_k:
            return exact_scores(self.conn, allowed, query, k)  # filter too sparse for KNN
        return exact_scores(self.conn, candidates, query, k)


class NumpyIndex:
    """All vectors in one float32 matrix (and their sign bits); cosine by a matrix product,
    exact up to ``PREFILTER_FROM`` rows. Reloads when another connection has changed the
    file (``PRAGMA data_version``)."""

    backend: Backend = "numpy"

    def __init__(self, conn: Any, dim: int) -> None:
        self.conn = conn
        self.dim = dim
        self._load()

    def _data_version(self) -> int:
        return int(self.conn.execute("PRAGMA data_version").fetchone()[0])

    def _load(self) -> None:
        rows = self.conn.execute("SELECT rowid, embedding FROM memory_vectors ORDER BY rowid")
        rowids: list[int] = []
        blobs: list[bytes] = []
        for rowid, blob in rows:
            rowids.append(rowid)
            blobs.append(blob)
        n = len(rowids)
        self._rowids = np.zeros(max(n, 1024), dtype=np.int64)
        self._matrix = np.zeros((max(n, 1024), self.dim), dtype=np.float32)
        self._bits = bit_columns(np.zeros((max(n, 1024), (self.dim + 7) // 8), dtype=np.uint8))
        self._rowids[:n] = rowids
        if n:
            self._matrix[:n] = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(n, -1)
            self._bits[:, :n] = bit_columns(sign_bits(self._matrix[:n]))
        self._n = n
        self._version: int | None = self._data_version()

    def add(self, rowids: Sequence[int], vectors: np.ndarray) -> None:
        fresh = np.asarray(rowids, dtype=np.int64)
        if fresh.size and (np.any(np.diff(fresh) <= 0) or (self._n and fresh[0] <= self._rowids[self._n - 1])):
            self._version = None  # not above every indexed rowid (another connection wrote): reload
        need = self._n + len(rowids)
        if need > len(self._rowids):
            size = max(need, 2 * len(self._rowids))
            self._rowids = np.resize(self._rowids, size)
            matrix = np.zeros((size, self.dim), dtype=np.float32)
            matrix[: self._n] = self._matrix[: self._n]
            self._matrix = matrix
            bits = np.zeros((self._bits.shape[0], size), dtype=self._bits.dtype)
            bits[:, : self._n] = self._bits[:, : self._n]
            self._bits = bits
        self._rowids[self._n : need] = rowids
        self._matrix[self._n : need] = vectors
        self._bits[:, self._n : need] = bit_columns(sign_bits(np.asarray(vectors, dtype=np.float32)))
        self._n = need

    def remove(self, rowids: Sequence[int]) -> None:
        keep = ~np.isin(self._rowids[: self._n], np.asarray(list(rowids), dtype=np.int64))
        n = int(keep.sum())
        self._rowids[:n] = self._rowids[: self._n][keep]
        self._matrix[:n] = self._matrix[: self._n][keep]
        self._bits[:, :n] = self._bits[:, : self._n][:, keep]
        self._n = n

    def _positions(self, allowed: Sequence[int]) -> np.ndarray:
        """Where the ``allowed`` rowids that are indexed sit (rowids are kept ascending: loaded
        in order, appended above the largest, removed in place), in ascending order."""
        rowids = self._rowids[: self._n]
        wanted = np.unique(np.asarray(allowed, dtype=np.int64))
        at = np.minimum(np.searchsorted(rowids, wanted), max(self._n - 1, 0))
        return at[rowids[at] == wanted] if self._n else at[:0]

    def search(self, query: np.ndarray, k: int, allowed: Sequence[int] | None) -> list[Hit]:
        if self._data_version() != self._version:
            self._load()
        rowids = self._rowids[: self._n]
        if allowed is not None and len(allowed) <= EXACT_FILTER_LIMIT:
            positions = self._positions(allowed)
            return _top(rowids[positions], similarities(np.take(self._matrix, positions, axis=0), query), k)
        mask = None
        if allowed is not None:
            mask = np.zeros(self._n, dtype=bool)
            mask[self._positions(allowed)] = True
        if self._n <= PREFILTER_FROM:
            scores = similarities(self._matrix[: self._n], query)
            if mask is not None:
                scores[~mask] = -np.inf
            return _top(rowids, scores, k)
        # Large: rank all rows by Hamming distance of sign bits (32 bytes a row instead of 1 KB),
        # then score the nearest RESCORE candidates exactly.
        distance = hamming(self._bits[:, : self._n], bit_columns(sign_bits(query[None, :]))[:, 0])
        if mask is not None:
            distance[~mask] = np.iinfo(distance.dtype).max
        wanted = min(self._n, max(RESCORE, RESCORE_PER_HIT * k))
        candidates = nearest(distance, wanted) if wanted < self._n else np.arange(self._n)
        if mask is not None:
            candidates = candidates[mask[candidates]]
        return _top(rowids[candidates], similarities(np.take(self._matrix, candidates, axis=0), query), k)
