"""One scorer listed more than once with different parameters: hit@5 beside hit@10 beside recall@5,
each its own result, baseline and history row."""

from __future__ import annotations

import json

import pytest

from evalloop.suites.models import Suite, load_suite
from support.cli import cli
from support.project import make_project

RANKED = '''
def ranked(input):
    return input["ids"]
'''

CASES = [  # relevant: r1, r2; hit@1/@2 and recall@k disagree on purpose
    {"id": "a", "input": {"ids": ["x", "r1", "y", "r2"]}, "expected": {"relevant_ids": ["r1", "r2"]}},
    {"id": "b", "input": {"ids": ["x", "y", "z", "w"]}, "expected": {"relevant_ids": ["r1"]}},
]


def suite(scorers: list) -> dict:
    return {"name": "labels", "target": "sut:ranked", "scorers": scorers, "cases": CASES}


def test_a_scorer_listed_twice_needs_its_own_k_or_name():
    with pytest.raises(ValueError, match="scorer 'hit' is listed twice"):
        Suite.model_validate(suite(["hit", "hit"]))
    refs = Suite.model_validate(suite([{"name": "hit", "params": {"k": 1}}, {"name": "hit", "params": {"k": 2}},
                                       {"name": "recall", "params": {"k": 2}, "as": "r2"}, "hit"])).scorers
    assert [r.label for r in refs] == ["hit@1", "hit@2", "r2", "hit"]


def test_labelled_scorers_are_stored_and_compared_under_their_labels(tmp_path):
    make_project(tmp_path, {"labels": suite([{"name": "hit", "params": {"k": 1}}, {"name": "hit", "params": {"k": 2}},
                                              {"name": "recall", "params": {"k": 2}}])}, target=RANKED)
    assert load_suite(tmp_path / "fixtures" / "labels.yaml").scorers[0].label == "hit@1"
    run = cli(tmp_path, "run", "--suite", "labels", "--json")
    assert run.returncode == 0, run.stderr
    means = {s["scorer"]: s["current"] for s in json.loads(run.stdout)["scorers"]}
    assert means == {"hit@1": 0.0, "hit@2": 0.5, "recall": 0.25}
    again = json.loads(cli(tmp_path, "run", "--suite", "labels", "--json").stdout)
    assert {s["scorer"]: s["baseline"] for s in again["scorers"]} == means  # each label its own baseline


def test_thresholds_name_the_label(tmp_path):
    data = suite([{"name": "hit", "params": {"k": 1}}, {"name": "hit", "params": {"k": 2}}])
    data["thresholds"] = {"hit@2": 0.3}
    assert Suite.model_validate(data).thresholds == {"hit@2": 0.3}
    data["thresholds"] = {"hit": 0.3}
    with pytest.raises(ValueError, match="thresholds names 'hit'"):
        Suite.model_validate(data)
    make_project(tmp_path, {"labels": {**suite(["hit", "hit"])}}, target=RANKED)
    bad = cli(tmp_path, "run", "--suite", "labels")
    assert bad.returncode == 2 and "listed twice" in bad.stderr
