"""The embedded memory store on real SQLite: both vector paths, tags, duplicates, metadata."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalloop.errors import ConfigError, EvalloopError
from evalloop.memory import HashingEmbedder, InvalidMemory, MemoryStore
from support.memory_contract import check_adapter


@pytest.fixture(params=["sqlite-vec", "numpy"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "numpy":
        monkeypatch.delenv("EVALLOOP_SQLITE_VEC", raising=False)  # the default path
    else:
        monkeypatch.setenv("EVALLOOP_SQLITE_VEC", "on")
    return request.param


@pytest.fixture
def store(tmp_path: Path, backend: str) -> MemoryStore:
    s = MemoryStore(tmp_path / "memory.db", embedder=HashingEmbedder(64))
    assert s.vector_backend == backend
    yield s
    s.close()


def test_store_get_list_delete_roundtrip(store: MemoryStore) -> None:
    first = store.store("OAuth tokens need a 5 minute buffer", ["auth"], {"source": "docs"})
    second = store.store("Next.js caching strategies", "web, frontend")
    record = store.get(first)
    assert record is not None
    assert record.information == "OAuth tokens need a 5 minute buffer"
    assert record.tags == ["auth"]
    assert record.metadata == {"source": "docs"}
    assert record.created_at is not None and record.created_at.tzinfo is not None
    assert [r.id for r in store.list()] == [second, first]  # newest first
    assert store.get(second).tags == ["web", "frontend"]
    assert store.count() == 2
    assert store.delete(first) is True
    assert store.delete(first) is False
    assert store.get(first) is None
    assert [f.record.id for f in store.find("OAuth tokens buffer", 5)] == [second]


def test_exact_duplicates_are_stored_once(store: MemoryStore) -> None:
    a = store.store("OAuth tokens need 5min buffer", ["auth"])
    b = store.store("OAuth tokens need 5min buffer", ["other"], {"x": 1})
    c = store.store("OAuth tokens need 5min buffer ")  # not byte-identical: a new memory
    assert a == b != c
    assert store.count() == 2
    assert store.get(a).tags == ["auth"] and store.get(a).metadata == {}  # the NOOP changed nothing
    ids = store.store_many(["x one", "x two", "x one", {"information": "x two", "tags": ["t"]}])
    assert ids[0] == ids[2] and ids[1] == ids[3] and ids[0] != ids[1]
    assert store.count() == 4


def test_tag_filter_is_exact_and_requires_all_tags(store: MemoryStore) -> None:
    both = store.store("similarity eval dropped 20%", "eval-failure,similarity,regression")
    store.store("similarity eval dropped again", ["eval-failure", "merge"])
    store.store("regression in similarity eval (text only, no tags)")
    store.store("similarity eval is fine", ["Eval-Failure"])  # case differs: not a match
    hits = store.find("similarity eval regression", 10, tags=["eval-failure", "regression"])
    assert [h.record.id for h in hits] == [both]
    assert len(store.find("similarity", 10, tags="eval-failure")) == 2
    assert store.find("similarity", 10, tags=["regression", "no-such-tag"]) == []
    assert store.find("similarity", 10, tags=["eval"]) == []  # no prefix or text matching
    assert {r.information for r in store.list(tags="eval-failure, regression")} == {"similarity eval dropped 20%"}


def test_find_reports_ranks_and_scores(store: MemoryStore) -> None:
    target = store.store("baseline window of five runs for the merge quality judge")
    for i in range(30):
        store.store(f"unrelated note number {i} about gardening and tomatoes")
    hits = store.find("merge quality judge baseline", 3)
    assert hits[0].record.id == target
    assert hits[0].text_rank == 1 and hits[0].vector_rank == 1
    assert hits[0].score == pytest.approx(1 / 21 + 0.15 / 21)  # text 1 and vectors 0.15 at rank 1, k 20
    assert hits[0].similarity is not None and hits[0].similarity > hits[1].similarity
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert store.find("merge", 0) == [] and store.find("   ", 3) == []


@pytest.mark.parametrize(
    "query",
    [
        'AND OR NOT NEAR(a b) "unbalanced',
        "col:value * ^start -minus +plus (paren",
        "'; DROP TABLE memories; --",
        "NEAR/3 \"\" '' `` {} [] :::",
        "émigré naïve café — ünïcödé 東京",
        "*",
    ],
)
def test_fts_survives_arbitrary_user_text(store: MemoryStore, query: str) -> None:
    store.store("a café in Tokyo 東京 for the naive émigré, col value start minus plus")
    hits = store.find(query, 5)
    assert len(hits) == 1
    assert store.count() == 1


def test_metadata_is_validated_and_round_trips_json(store: MemoryStore) -> None:
    meta = {"eval_name": "sim", "drop": 0.2, "runs": [1, 2], "nested": {"ok": True, "n": None}}
    mid = store.store("with metadata", metadata=meta)
    assert store.get(mid).metadata == meta
    as_string = store.store("json string metadata", metadata=json.dumps({"current_score": 0.68}))
    assert store.get(as_string).metadata == {"current_score": 0.68}
    for bad in ["{not json", "[1, 2]", {"x": float("nan")}, {"x": {1, 2}}, {"x": object()}]:
        with pytest.raises(InvalidMemory) as err:
            store.store("bad metadata", metadata=bad)
        assert "memory metadata" in str(err.value) and isinstance(err.value, EvalloopError)
    with pytest.raises(InvalidMemory):
        store.store("   ")
    with pytest.raises(InvalidMemory):
        store.store("bad tags", tags=[1, 2])  # type: ignore[list-item]
    with pytest.raises(InvalidMemory):  # a bad item fails the whole batch before anything is written
        store.store_many(["fine", {"information": "bad", "metadata": "[]"}])
    assert store.count() == 2


def test_reopen_keeps_data_and_rejects_another_embedder(tmp_path: Path, backend: str) -> None:
    path = tmp_path / "m.db"
    with MemoryStore(path, embedder=HashingEmbedder(64)) as s:
        mid = s.store("persisted memory about flaky retries", ["keep"])
    with MemoryStore(path) as s:  # a hashing store reopens without naming the embedder
        assert s.embedder.name == "hashing:64"
        assert s.find("flaky retries", 1, tags="keep")[0].record.id == mid
    with pytest.raises(ConfigError, match=r"hashing:64.*hashing:32"):
        MemoryStore(path, embedder=HashingEmbedder(32))


def test_store_keeps_the_adapter_protocols_promises(store: MemoryStore) -> None:
    check_adapter(store)


def test_files_move_between_vector_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "shared.db"
    emb = HashingEmbedder(64)
    monkeypatch.setenv("EVALLOOP_SQLITE_VEC", "on")
    with MemoryStore(path, emb) as s:
        keep = s.store("written with sqlite-vec about timeouts")
        gone = s.store("to be deleted on the numpy path")
    monkeypatch.setenv("EVALLOOP_SQLITE_VEC", "off")
    with MemoryStore(path, emb) as s:
        assert s.vector_backend == "numpy"
        assert s.delete(gone)
        added = s.store("written with numpy about rate limits")
    monkeypatch.setenv("EVALLOOP_SQLITE_VEC", "on")
    with MemoryStore(path, emb) as s:
        assert s.vector_backend == "sqlite-vec"
        (n,) = s._conn.execute("SELECT count(*) FROM memory_vec_bits").fetchone()
        assert n == 2  # the bit index was reconciled with the stored vectors
        assert s.find("rate limits", 1)[0].record.id == added
        assert s.find("timeouts sqlite-vec", 1)[0].record.id == keep


def test_numpy_index_sees_writes_from_another_connection(tmp_path: Path, backend: str) -> None:
    path = tmp_path / "two.db"
    emb = HashingEmbedder(64)
    with MemoryStore(path, emb) as reader, MemoryStore(path, emb) as writer:
        reader.store("first memory about caching")
        mid = writer.store("second memory about quantum tunnelling")
        assert reader.find("quantum tunnelling", 1)[0].record.id == mid


def test_default_embedder_loads_only_when_needed(tmp_path: Path) -> None:
    from evalloop.memory import default_embedder

    with MemoryStore(tmp_path / "lazy.db") as s:
        assert s.embedder_name == "model2vec:minilm-l6-v2-static-256" and s.dim == 256
        assert s.list() == [] and s._embedder is None  # listing needs no model
        s.store("the default embedder is loaded now")
        assert s.embedder is default_embedder()
    with MemoryStore(tmp_path / "lazy.db") as s:
        assert s.list(limit=1)[0].information == "the default embedder is loaded now"
        with pytest.raises(ConfigError, match="built with embedder 'model2vec"):
            MemoryStore(tmp_path / "lazy.db", embedder=HashingEmbedder(256))


def test_update_keeps_id_and_creation_and_reindexes(store: MemoryStore) -> None:
    a = store.store("kubernetes pods restart on OOM", ["eval-failure", "status:open"], {"n": 1})
    b = store.store("apple pie uses cinnamon", ["other"])
    created = store.get(a).created_at
    assert store.update(a, "postgres pool allows twenty connections", ["eval-failure", "status:resolved"],
                        {"n": 2}) == a
    record = store.get(a)
    assert record.information == "postgres pool allows twenty connections" and record.metadata == {"n": 2}
    assert record.tags == ["eval-failure", "status:resolved"] and record.created_at == created
    assert [r.id for r in store.list()] == [a, b]                      # the updated one is newest
    assert store.list(tags=["status:open"]) == [] and len(store) == 2
    assert store.find("postgres pool connections", 1)[0].record.id == a  # text and vectors reindexed
    assert all(h.record.id != a for h in store.find("kubernetes OOM", 2) if h.text_rank is not None)
    with pytest.raises(ConfigError, match="already holds this text"):
        store.update(a, "apple pie uses cinnamon")
    with pytest.raises(ConfigError, match="no memory with id"):
        store.update("nope", "x")
