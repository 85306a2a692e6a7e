"""The synthetic weekly corpus: determinism, structure, query filtering, both deliveries."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from evalloop.retrieval import generate_corpus, load_dataset, to_dataset, write_dataset
from evalloop.retrieval.generator import PER_WEEK
from evalloop.retrieval.journal import journal_files, write_journals


def test_deterministic_per_seed() -> None:
    a, b = generate_corpus(3, "fast", seed=11), generate_corpus(3, "fast", seed=11)
    assert [f.content for f in a.facts] == [f.content for f in b.facts]
    c = generate_corpus(3, "fast", seed=12)
    assert [f.content for f in a.facts] != [f.content for f in c.facts]


@pytest.mark.parametrize("mode", ["fast", "full"])
def test_weekly_structure(mode: str) -> None:
    corpus = generate_corpus(4, mode, seed=3)  # type: ignore[arg-type]
    per_week = sum(PER_WEEK[mode].values())
    for week in range(4):
        facts = [f for f in corpus.facts if f.week == week]
        kinds = Counter(f.kind for f in facts)
        assert kinds["template"] == per_week
        assert kinds["edge"] == (10 if week == 0 else 0)
        pairs_dup, pairs_con = kinds["duplicate"] // 2, kinds["contradiction"] // 2
        assert (3 <= pairs_dup <= 6) if week >= 1 else pairs_dup == 0
        assert (2 <= pairs_con <= 4) if week >= 2 else pairs_con == 0
    ids = [f.id for f in corpus.facts]
    assert ids == list(range(1, len(ids) + 1))
    chains = Counter(f.chain for f in corpus.facts if f.kind == "evolution")
    assert all(n == 2 for n in chains.values()) and len(chains) == 6
    dup_groups = Counter(f.group for f in corpus.facts if f.kind == "duplicate")
    assert set(dup_groups.values()) == {2}
    assert all("{" not in f.content for f in corpus.facts)


def test_change_queries_filtered_by_week() -> None:
    corpus = generate_corpus(4)
    sets = Counter(q.set for q in corpus.queries_for())
    assert sets["current_state"] == 6 and sets["change_awareness"] == 5 and sets["null"] == 10
    early = Counter(q.set for q in corpus.queries_for(max_week=1))
    assert early["current_state"] == 2  # only the chains that changed by week 1
    assert early["standard"] == sets["standard"]
    ds = to_dataset(generate_corpus(2))
    assert {q.stratum for q in ds.queries} >= {"standard", "old_memory", "current_state"}
    assert not any(q.query_id.startswith("null") for q in ds.queries)


def test_dataset_export_roundtrips_and_grades_targets(tmp_path: Path) -> None:
    corpus = generate_corpus(4, seed=5)
    ds = to_dataset(corpus)
    loaded = load_dataset(write_dataset(ds, tmp_path / "facts"))
    assert loaded.qrels == ds.qrels and len(loaded.corpus) == len(corpus.facts)
    by_id = {f.id: f for f in corpus.facts}
    job_now = ds.qrels["chg_01"]  # "Where do I work now?"
    assert [by_id[int(i)].content for i, g in job_now.items() if g == 2] == [
        "I started a new role at Lumenfield as a product manager"
    ]
    sister = ds.qrels["old_00"]
    assert any(by_id[int(i)].kind == "edge" and g == 2 for i, g in sister.items())


def test_journal_delivery(tmp_path: Path) -> None:
    corpus = generate_corpus(2, seed=9)
    files = journal_files(corpus.facts)
    assert "MEMORY.md" in files and len(files) == 2 * 3 + 1
    text, ids = files["memory/2025-01-06.md"]
    assert text.startswith("# 2025-01-06\n\n## Summary\nNotes from Monday")
    assert "## What Happened" in text
    assert all(f"- {f.content}" in text for f in corpus.facts if f.id in ids)
    listed = sorted(i for path, (_, ids) in files.items() if path != "MEMORY.md" for i in ids)
    assert listed == [f.id for f in corpus.facts]  # every fact delivered exactly once by day
    core = files["MEMORY.md"][0]
    assert core.startswith("# Core Memories") and "## Pets" in core
    written = write_journals(corpus.facts, tmp_path)
    assert (tmp_path / "memory" / "2025-01-15.md").read_text().startswith("# 2025-01-15")
    assert len(written) == len(files)
    jd = load_dataset(write_dataset(to_dataset(corpus, "journal"), tmp_path / "journal"))
    assert all(g in (1, 2) for rel in jd.qrels.values() for g in rel.values())
    assert "MEMORY.md" in jd.qrels["old_00"]
