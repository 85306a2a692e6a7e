"""Loading, validating and writing corpus/queries/qrels JSONL datasets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalloop.errors import FixtureError
from evalloop.retrieval.dataset import load_dataset, write_dataset


def write(dirpath: Path, corpus, queries, qrels) -> Path:
    for name, rows in (("corpus", corpus), ("queries", queries), ("qrels", qrels)):
        lines = [r if isinstance(r, str) else json.dumps(r) for r in rows]
        (dirpath / f"{name}.jsonl").write_text("\n".join(lines) + "\n")
    return dirpath


CORPUS = [
    {
        "id": 1,
        "content": "deploy with blue green",
        "category": "ops",
        "tags": "deploy,ops",
        "expanded_keywords": "release rollout",
        "importance": 0.9,
    },
    {"id": 2, "content": "postgres vacuum schedule", "category": "db", "tags": "postgres"},
    {"id": 3, "content": "team lunch on fridays", "category": "social"},
]
QUERIES = [
    {
        "query_id": "exact_1",
        "text": "blue green deploy",
        "stratum": "exact",
        "relevant_ids": [1],
        "_note": "lifted phrase",
        "_jaccard": 0.5,
    },
    {
        "query_id": "multi_1",
        "text": "ops and db chores",
        "stratum": "multihop",
        "relevant_ids": [1, 2],
    },
]
QRELS = [
    {"query_id": "exact_1", "relevant_ids": [1]},
    {"query_id": "multi_1", "relevant_ids": [1, 2]},
]


def test_load_valid_dataset(tmp_path: Path) -> None:
    ds = load_dataset(write(tmp_path, CORPUS, QUERIES, QRELS))
    assert [d.key for d in ds.corpus] == ["1", "2", "3"]
    assert ds.corpus[0].field("tags") == "deploy,ops"
    assert ds.qrels == {"exact_1": {"1": 1}, "multi_1": {"1": 1, "2": 1}}
    assert ds.strata() == {"exact_1": "exact", "multi_1": "multihop"}
    assert ds.queries[0].model_extra["_note"] == "lifted phrase"
    assert ds.subset(strata={"exact"}).qrels == {"exact_1": {"1": 1}}


def test_roundtrip_keeps_graded_relevance_and_int_ids(tmp_path: Path) -> None:
    qrels = [QRELS[0], {"query_id": "multi_1", "relevance": {"1": 2, "2": 1, "3": 0}}]
    ds = load_dataset(write(tmp_path, CORPUS, QUERIES, qrels))
    assert ds.qrels["multi_1"] == {"1": 2, "2": 1, "3": 0}
    out = write_dataset(ds, tmp_path / "copy")
    first = json.loads((out / "qrels.jsonl").read_text().splitlines()[1])
    assert first["relevant_ids"] == [1, 2]
    assert json.loads((out / "corpus.jsonl").read_text().splitlines()[0])["id"] == 1
    again = load_dataset(out)
    assert again.qrels == ds.qrels
    assert again.corpus[1].field("category") == "db"


@pytest.mark.parametrize(
    ("corpus", "queries", "qrels", "where", "what"),
    [
        (CORPUS[:2] + ["{not json"], QUERIES, QRELS, "corpus.jsonl:3", "invalid JSON"),
        (
            CORPUS + [{"id": 2, "content": "twin"}],
            QUERIES,
            QRELS,
            "corpus.jsonl:4",
            "duplicate doc id",
        ),
        (CORPUS + [{"content": "no id"}], QUERIES, QRELS, "corpus.jsonl:4", "field 'id'"),
        (CORPUS, QUERIES + [QUERIES[0]], QRELS, "queries.jsonl:3", "duplicate query_id"),
        (
            CORPUS,
            QUERIES,
            [QRELS[0], {"query_id": "multi_1", "relevant_ids": [1, 99]}],
            "qrels.jsonl:2",
            "doc id '99'",
        ),
        (
            CORPUS,
            QUERIES,
            QRELS + [{"query_id": "ghost", "relevant_ids": [1]}],
            "qrels.jsonl:3",
            "'ghost' is not in queries.jsonl",
        ),
        (CORPUS, QUERIES, QRELS[:1], "queries.jsonl:2", "'multi_1' has no line in qrels"),
        (
            CORPUS,
            QUERIES,
            [QRELS[0], {"query_id": "multi_1", "relevant_ids": []}],
            "qrels.jsonl:2",
            "no relevant documents",
        ),
        (CORPUS, QUERIES, [QRELS[0], QRELS[0]], "qrels.jsonl:2", "duplicate judgments"),
        (CORPUS, QUERIES, ["[1, 2]"] + QRELS, "qrels.jsonl:1", "expected a JSON object"),
    ],
)
def test_errors_name_file_and_line(tmp_path: Path, corpus, queries, qrels, where, what) -> None:
    write(tmp_path, corpus, queries, qrels)
    with pytest.raises(FixtureError) as info:
        load_dataset(tmp_path)
    assert info.value.where.endswith(where)
    assert what in info.value.what
    assert info.value.hint


def test_missing_file_and_explicit_paths(tmp_path: Path) -> None:
    with pytest.raises(FixtureError, match="file not found"):
        load_dataset(tmp_path)
    write(tmp_path, CORPUS, QUERIES, QRELS)
    (tmp_path / "qrels.jsonl").rename(tmp_path / "judgments.jsonl")
    ds = load_dataset(
        corpus=tmp_path / "corpus.jsonl",
        queries=tmp_path / "queries.jsonl",
        qrels=tmp_path / "judgments.jsonl",
        name="mine",
    )
    assert ds.name == "mine" and len(ds.queries) == 2


@pytest.mark.parametrize("corpus", [None, ""])
def test_explicit_paths_without_a_directory_need_all_three(tmp_path: Path, corpus) -> None:
    write(tmp_path, CORPUS, QUERIES, QRELS)
    with pytest.raises(FixtureError, match="no dataset given"):  # "" was a TypeError (None / "corpus.jsonl")
        load_dataset(corpus=corpus, queries=tmp_path / "queries.jsonl", qrels=tmp_path / "qrels.jsonl")


@pytest.mark.parametrize("stratum", [None, "", 3])
def test_a_query_without_a_stratum_is_an_error_naming_file_and_line(tmp_path: Path, stratum) -> None:
    bad = {k: v for k, v in QUERIES[1].items() if k != "stratum"}
    if stratum is not None:
        bad["stratum"] = stratum
    write(tmp_path, CORPUS, [QUERIES[0], bad], QRELS)
    with pytest.raises(FixtureError) as info:
        load_dataset(tmp_path)
    assert info.value.where.endswith("queries.jsonl:2")
    assert "'multi_1' has no 'stratum'" in info.value.what and "stratum" in info.value.hint
