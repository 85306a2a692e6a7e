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
