"""The benchmark commands through the real console script: generate, run, compare, bad data."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EVALLOOP = shutil.which("evalloop") or str(Path(sys.executable).parent / "evalloop")


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([EVALLOOP, *args], cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "NO_COLOR": "1"})


def suites(root: Path) -> list[str]:
    from evalloop.history.store import HistoryStore

    return HistoryStore(f"sqlite:///{root / 'history' / 'evalloop.db'}").suites()


def test_generate_run_and_compare_targets(tmp_path):
    made = cli(tmp_path, "bench", "generate", "--out", "fixtures/mb", "--weeks", "2", "--seed", "3")
    assert made.returncode == 0, made.stderr
    assert (tmp_path / "fixtures" / "mb" / "qrels.jsonl").is_file()
    assert invoke(tmp_path, "bench", "generate", "--out", "fixtures/mb").exit_code == 2  # no clobber

    run = cli(tmp_path, "run", "--suite", "mb", "--json")
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    scorers = {s["scorer"]: s for s in doc["scorers"]}
    assert set(scorers) == {"recall@5", "recall@10", "ndcg@10", "mrr@20"}
    assert 0 < scorers["mrr@20"]["current"] <= 1 and doc["n_cases"] > 40

    cmp = cli(tmp_path, "compare-targets", "-s", "mb", "-t", "bm25", "-t", "memory", "-t", "hybrid",
              "--json")
    assert cmp.returncode == 0, cmp.stderr
    table = json.loads(cmp.stdout)
    rows = {r["target"]: r for r in table["results"]}
    assert list(rows) == ["bm25", "memory", "hybrid"] and table["reference"] == "bm25"
    assert rows["bm25"]["means"]["mrr@20"] == pytest.approx(scorers["mrr@20"]["current"])  # same suite, same numbers
    assert rows["bm25"]["vs_reference"] == {}
    diff = rows["memory"]["vs_reference"]["mrr@20"]
    assert diff["diff"] == pytest.approx(rows["memory"]["means"]["mrr@20"] - rows["bm25"]["means"]["mrr@20"], abs=1e-12)
    assert 0 < diff["p_value"] <= 1 and diff["n"] == doc["n_cases"]
    for r in rows.values():
        assert r["stats"]["index_bytes"] > 0 and r["stats"]["latency_p95_ms"] >= r["stats"]["latency_p50_ms"]
        assert {s["tag"] for s in r["strata"]["strata"]} >= {"standard", "old_memory"}
    # not recorded: the project history holds only the one ordinary run
    assert suites(tmp_path) == ["mb"]

    text = cli(tmp_path, "compare-targets", "-s", "mb", "-t", "bm25", "-t", "memory", "--strata",
               "--record")
    assert text.returncode == 0, text.stderr
    assert "recall@5" in text.stdout and "memory per stratum" in text.stdout
    assert suites(tmp_path) == ["mb", "mb.bm25", "mb.memory"]


def invoke(root: Path, *args: str):
    """The same Typer app in-process (one-line errors and exit codes come from the app itself)."""
    from typer.testing import CliRunner

    from evalloop.cli import app

    return CliRunner().invoke(app, [*args, "-C", str(root)])


def test_bad_datasets_fail_in_one_line_with_exit_2(tmp_path):
    from evalloop.cli.benchmarks import write_benchmark

    write_benchmark(tmp_path / "fixtures" / "mb", weeks=1)
    qrels = tmp_path / "fixtures" / "mb" / "qrels.jsonl"
    lines = qrels.read_text().splitlines()
    lines[1] = json.dumps({"query_id": json.loads(lines[1])["query_id"], "relevant_ids": [99999]})
    qrels.write_text("\n".join(lines) + "\n")
    bad = invoke(tmp_path, "run", "--suite", "mb")
    assert bad.exit_code == 2 and bad.stdout == "", bad.output
    assert len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    assert "qrels.jsonl:2" in bad.stderr and "99999" in bad.stderr and "corpus.jsonl" in bad.stderr, bad.stderr

    qa = tmp_path / "fixtures" / "qa"
    qa.mkdir()
    (qa / "conversations.jsonl").write_text('{"id": "c1", "turns": ["Ana lives in Lisbon."]}\n')
    (qa / "questions.jsonl").write_text(
        '{"id": "q1", "question": "Where?", "answer": "Lisbon", "conversation_id": "c1"}\n'
        '{"id": "q2", "question": "Who?", "answer": "Ana", "conversation_id": "c9"}\n')
    (tmp_path / "fixtures" / "qa.yaml").write_text(
        "name: qa\ndataset: qa\ntarget: evalloop.retrieval.suite_targets:QATarget\nscorers: [qa-recall]\n")
    bad = invoke(tmp_path, "suites", "validate", "qa")
    assert bad.exit_code == 2, bad.output
    assert "questions.jsonl:2" in bad.stderr and "'c9'" in bad.stderr, bad.stderr

    (tmp_path / "fixtures" / "gone.yaml").write_text(
        "name: gone\ndataset: nowhere\ntarget: evalloop.retrieval.suite_targets:RetrieverTarget\n"
        "scorers: [mrr]\n")
    bad = invoke(tmp_path, "run", "--suite", "gone")
    assert bad.exit_code == 2 and "dataset folder not found" in bad.stderr, bad.output
    bad = invoke(tmp_path, "compare-targets", "-s", "retrieval-bm25", "-t", "bm25", "-t", "nosuch")
    assert bad.exit_code == 2 and "unknown retriever 'nosuch'" in bad.stderr, bad.output
    assert not (tmp_path / "history").exists()  # nothing ran, nothing was written
