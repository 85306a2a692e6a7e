"""LoCoMo as its users run it: repeated scorers and `as:` names in every command, adversarial
questions kept out of the headline, both category naming schemes, evidence ids normalised and
every skip counted, session dates searchable, and metric names that say their cut."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from support.cli import cli
from test_benchsuite_import import LOCOMO


@pytest.fixture
def project(tmp_path: Path) -> Path:
    source = tmp_path / "locomo10.json"
    source.write_text(json.dumps(LOCOMO), encoding="utf-8")
    made = cli(tmp_path, "bench", "import", "locomo", str(source))
    assert made.returncode == 0, made.stderr
    return tmp_path


def _alias(project: Path) -> Path:
    """The imported retrieval suite with one more, renamed, use of ndcg."""
    path = project / "fixtures" / "locomo.yaml"
    suite = yaml.safe_load(path.read_text())
    suite["scorers"].append({"name": "ndcg", "params": {"k": 5}, "as": "shallow"})
    path.write_text(yaml.safe_dump(suite, sort_keys=False))
    return path


def test_compare_targets_runs_a_suite_with_repeated_scorers_and_an_as_name(project):
    _alias(project)
    done = cli(project, "compare-targets", "-s", "locomo", "-t", "bm25", "-t", "memory", "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["scorers"][:2] == ["hit@5", "hit@10"] and doc["scorers"][-1] == "shallow"
    second = doc["results"][1]
    assert set(second["vs_reference"]) == set(doc["scorers"])
    assert all(second["means"][s] is not None for s in doc["scorers"])


def test_learn_check_and_suites_list_show_the_as_names(project):
    _alias(project)
    done = cli(project, "learn", "check", "-s", "locomo", "-V", "a:inject=off", "-V", "b:inject=off", "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert "hit@5" in doc["scorers"] and "shallow" in doc["scorers"]
    assert all(doc["results"][1]["means"][s] is not None for s in doc["scorers"])
    listed = cli(project, "suites", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    row = next(r for r in json.loads(listed.stdout) if r["name"] == "locomo")
    assert row["scorers"][:2] == ["hit@5", "hit@10"] and row["scorers"][-1] == "shallow"


def _doc(folder: Path, name: str) -> list[dict]:
    return [json.loads(line) for line in (folder / name).read_text().splitlines() if line.strip()]


def test_adversarial_questions_stay_out_of_the_retrieval_headline_and_are_counted(project):
    folder = project / "fixtures" / "locomo"
    queries = _doc(folder, "queries.jsonl")
    assert not any("adversarial" in q["stratum"] for q in queries)
    record = json.loads((folder / "import.json").read_text())
    assert record["skipped"]["adversarial (category 5: scored as abstention in the QA suite)"] == 1


def test_strata_name_both_category_schemes():
    from evalloop.retrieval.loaders import category_label

    assert category_label(1) == "1 multi-hop / mem0 single-hop"
    assert category_label(2) == "2 temporal"
    assert category_label(3) == "3 open-domain / mem0 multi-hop"
    assert category_label(4) == "4 single-hop / mem0 open-domain"


def test_evidence_ids_are_normalised_every_drop_is_counted_and_the_source_is_hashed(tmp_path):
    import hashlib

    from evalloop.retrieval.loaders import load_locomo

    data = json.loads(json.dumps(LOCOMO))
    qa = data[0]["qa"]
    qa[0]["evidence"] = ["D1:02"]               # zero-padded: the turn D1:2
    qa[1]["evidence"] = ["D1:3; D2:01", "D7:7"]  # one unknown id among good ones
    source = tmp_path / "locomo10.json"
    source.write_text(json.dumps(data), encoding="utf-8")
    dataset, report = load_locomo(source)
    assert dataset.qrels["conv-a:q1"] == {"conv-a:D1:2": 1}
    assert dataset.qrels["conv-a:q2"] == {"conv-a:D1:3": 1, "conv-a:D2:1": 1}
    assert report.dropped_evidence == {"not in the conversation": 1}
    assert report.sha256 == hashlib.sha256(source.read_bytes()).hexdigest()
    made = cli(tmp_path, "bench", "import", "locomo", str(source))
    assert made.returncode == 0, made.stderr
    said = " ".join(made.stdout.split())
    assert "evidence ids dropped: 1 not in the conversation" in said and "1 no evidence" in said
    assert json.loads((tmp_path / "fixtures" / "locomo" / "import.json").read_text())["sha256"] == report.sha256


def test_session_dates_are_searchable_text_unless_switched_off(tmp_path):
    from evalloop.retrieval.loaders import load_locomo

    source = tmp_path / "locomo10.json"
    source.write_text(json.dumps(LOCOMO), encoding="utf-8")
    dated, report = load_locomo(source)
    assert dated.doc_map()["conv-a:D1:2"].content == "[1:56 pm on 8 May, 2023] Bob: I started guitar lessons last week."
    assert report.dates is True
    plain, report = load_locomo(source, dates=False)
    assert plain.doc_map()["conv-a:D1:2"].content == "Bob: I started guitar lessons last week."
    assert report.dates is False
    made = cli(tmp_path, "bench", "import", "locomo", str(source), "--no-dates", "--out", str(tmp_path / "nodates"))
    assert made.returncode == 0, made.stderr
    corpus = _doc(tmp_path / "nodates", "corpus.jsonl")
    assert not any(d["content"].startswith("[") for d in corpus)


def test_imported_metric_names_say_their_cut(project):
    suite = yaml.safe_load((project / "fixtures" / "locomo.yaml").read_text())
    names = [s if isinstance(s, str) else s.get("as") or s["name"] for s in suite["scorers"]]
    assert "mrr" not in names and "mrr@20" in names
    run = cli(project, "run", "--suite", "locomo", "--json")
    assert run.returncode == 0, run.stderr
    means = {s["scorer"]: s["current"] for s in json.loads(run.stdout)["scorers"]}
    assert 0 < means["mrr@20"] <= 1


def test_compare_targets_tests_and_intervals_go_by_conversation(project):
    done = cli(project, "compare-targets", "-s", "locomo", "-t", "bm25", "-t", "memory", "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    second = doc["results"][1]
    assert second["vs_reference"]["hit@5"]["test"] == "paired permutation by scope"
    low, high = second["intervals"]["recall@10"]
    assert low <= second["means"]["recall@10"] <= high
    text = cli(project, "compare-targets", "-s", "locomo", "-t", "bm25", "-t", "memory")
    said = " ".join(text.stdout.split())
    assert "differences tested by conversation" in said and "whole conversations resampled" in said


def test_generated_conversations_import_as_locomo_and_run(tmp_path):
    made = cli(tmp_path, "bench", "conversations", "--out", "conversations.json", "--n", "2", "--seed", "3")
    assert made.returncode == 0, made.stderr
    samples = json.loads((tmp_path / "conversations.json").read_text())
    assert len(samples) == 2 and {q["category"] for s in samples for q in s["qa"]} == {1, 2, 4, 5}
    imported = cli(tmp_path, "bench", "import", "locomo", "conversations.json")
    assert imported.returncode == 0, imported.stderr
    run = cli(tmp_path, "run", "--suite", "locomo", "--json")
    assert run.returncode == 0, run.stderr
    means = {s["scorer"]: s["current"] for s in json.loads(run.stdout)["scorers"]}
    assert means["hit@10"] > 0.5
    again = cli(tmp_path, "bench", "conversations", "--out", "conversations.json")
    assert again.returncode == 2 and "already exists" in again.stderr
