"""The NumPy vector path on large stores: sign-bit prefilter, then exact rescoring."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from evalloop.memory import MemoryStore, vectors


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> MemoryStore:
    monkeypatch.setenv("EVALLOOP_SQLITE_VEC", "off")
    monkeypatch.setattr(vectors, "PREFILTER_FROM", 100)  # prefilter from 100 rows on
    monkeypatch.setattr(vectors, "RESCORE", 60)
    monkeypatch.setattr(vectors, "RESCORE_PER_HIT", 6)
    monkeypatch.setattr(vectors, "EXACT_FILTER_LIMIT", 50)
    s = MemoryStore(tmp_path / "m.db")  # the shipped static model: dense vectors, as in use
    words = ["cache", "token", "retry", "judge", "prompt", "scorer", "index", "webhook", "queue", "ranking"]
    rng = np.random.default_rng(5)
    s.store_many([{"information": " ".join(rng.choice(words, 5)) + f" ticket {i}", "tags": [f"t{i % 4}"]}
                  for i in range(600)])
    yield s
    s.close()


def _kth_exact(store: MemoryStore, query: np.ndarray, k: int, allowed: set[int] | None = None) -> float:
    """The k-th best exact similarity (ties make "the" top k ambiguous; scores are not)."""
    rows = store._conn.execute("SELECT rowid, embedding FROM memory_vectors").fetchall()
    scores = [float(np.frombuffer(blob, dtype=np.float32) @ query) for pk, blob in rows
              if allowed is None or pk in allowed]
    return sorted(scores, reverse=True)[k - 1]


def _recall(hits: list[tuple[int, float]], kth: float, k: int) -> float:
    return sum(score >= kth - 1e-6 for _, score in hits) / k


def test_prefiltered_search_finds_the_exact_top_hits(store: MemoryStore) -> None:
    index = store._index
    assert index.backend == "numpy" and index._n > vectors.PREFILTER_FROM
    pairs = [("cache", "budget"), ("judge", "schema"), ("index", "token"), ("queue", "prompt"), ("scorer", "ranking")]
    queries = store.embedder.embed([f"{a} {b} retry" for a, b in pairs])
    recall = [_recall(index.search(q, 10, None), _kth_exact(store, q, 10), 10) for q in queries]
    assert np.mean(recall) >= 0.95, recall
    hits = index.search(queries[0], 10, None)
    assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)  # exact scores, ranked


def test_prefiltered_search_with_a_broad_filter_keeps_to_it(store: MemoryStore) -> None:
    allowed = [pk for (pk,) in store._conn.execute("SELECT memory_pk FROM memory_tags WHERE tag = 't1'")]
    assert len(allowed) > vectors.EXACT_FILTER_LIMIT
    q = store.embedder.embed(["judge prompt webhook"])[0]
    hits = store._index.search(q, 10, allowed)
    assert len(hits) == 10 and {pk for pk, _ in hits} <= set(allowed)
    assert _recall(hits, _kth_exact(store, q, 10, set(allowed)), 10) >= 0.8


def test_sign_bits_follow_deletes_and_updates(store: MemoryStore) -> None:
    victims = [r.id for r in store.list(limit=50)]
    for mid in victims[:25]:
        store.delete(mid)
    store.update(victims[30], "an entirely rewritten memory about lunch")
    index = store._index
    assert np.array_equal(vectors.row_bits(index._bits[:, : index._n]), vectors.sign_bits(index._matrix[: index._n]))
    assert store.find("rewritten memory about lunch", limit=1)[0].record.id == victims[30]


@pytest.mark.parametrize("dim", [256, 40])  # 64-bit words, and bytes when they do not fit
def test_hamming_over_bit_columns_counts_every_differing_bit(dim: int) -> None:
    rng = np.random.default_rng(dim)
    rows = rng.standard_normal((300, dim)).astype(np.float32)
    query = rng.standard_normal(dim).astype(np.float32)
    bits = vectors.sign_bits(rows)
    columns = vectors.bit_columns(bits)
    assert np.array_equal(vectors.row_bits(columns), bits)
    expected = np.unpackbits(bits ^ vectors.sign_bits(query[None, :])[0], axis=1).sum(axis=1)
    distance = vectors.hamming(columns, vectors.bit_columns(vectors.sign_bits(query[None, :]))[:, 0])
    assert distance.tolist() == expected.tolist()


def test_filtered_search_finds_allowed_rows_after_deletes_and_updates(store: MemoryStore) -> None:
    victims = [r.id for r in store.list(limit=40)]
    for mid in victims[:10]:
        store.delete(mid)
    store.update(victims[20], "judge prompt webhook rewritten")
    index = store._index
    rowids = index._rowids[: index._n]
    assert np.all(np.diff(rowids) > 0)  # kept ascending: lookups by binary search
    pks = [pk for (pk,) in store._conn.execute("SELECT pk FROM memories ORDER BY pk")]
    allowed = pks[::17] + [10**6, -3]  # with rowids that are not indexed
    assert rowids[index._positions(allowed)].tolist() == pks[::17]
    q = store.embedder.embed(["judge prompt webhook"])[0]
    hits = index.search(q, 5, allowed)  # few allowed: exact scores of just those rows
    exact = sorted(((float(index._matrix[i] @ q), int(rowids[i])) for i in range(index._n)
                    if rowids[i] in set(allowed)), reverse=True)
    assert [pk for pk, _ in hits] == [pk for _, pk in exact[:5]]
    broad = pks[::3]  # more than EXACT_FILTER_LIMIT: the prefilter, masked to the allowed rows
    assert {pk for pk, _ in index.search(q, 10, broad)} <= set(broad)


def test_tag_find_on_a_file_another_connection_filled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALLOOP_SQLITE_VEC", "off")
    from evalloop.memory import HashingEmbedder

    emb = HashingEmbedder(64)
    with MemoryStore(tmp_path / "t.db", emb) as reader, MemoryStore(tmp_path / "t.db", emb) as writer:
        reader.store_many([{"information": f"note {i} about caching", "tags": ["a"]} for i in range(20)])
        newest = reader.list(limit=1)[0].id
        writer.delete(newest)  # the reader's index still holds the largest rowid
        mid = writer.store("queue retries with backoff", ["a", "b"])
        reader.store("another caching note", ["a"])  # appended while the index is stale
        assert reader.find("queue retries backoff", 3, tags=["b"])[0].record.id == mid
        assert len(reader.find("caching", 30, tags="a")) == 21


def test_similarities_are_the_matrix_product() -> None:
    rng = np.random.default_rng(3)
    rows = rng.standard_normal((2500, 256)).astype(np.float32)
    query = rng.standard_normal(256).astype(np.float32)
    expected = rows.astype(np.float64) @ query.astype(np.float64)
    got = vectors.similarities(np.take(rows, np.arange(0, 2500, 3), axis=0), query)
    assert got.dtype == np.float32 and np.allclose(got, expected[::3], atol=1e-4)
