"""A run's fingerprint is two parts kept apart (issue #36, finding 7): the product (target, its
parameters and description) and each scorer's measurement (its code, parameters, judge model);
the verdict policy (threshold, pass mark) is neither. Through real runs on a real SQLite history."""

from __future__ import annotations

import pytest

from evalloop import load_settings, run_suite
from evalloop.history import HistoryStore, identity
from support.project import make_project

TARGET = '''
def answer(input, prompt="v1"):
    return 1.0
'''

SCORERS = '''
from evalloop import Score, scorer

@scorer("scaled", kind="heuristic", min_score=0)
def scaled(input, output, expected, scale=1.0):
    return Score(value=float(output) * scale)
'''


def suite(prompt: str = "v1", scale: float = 1.0, verdict: dict | None = None, **entry) -> dict:
    return {"name": "p", "holdout": 0, "target": {"ref": "sut:answer", "params": {"prompt": prompt}},
            "scorers": [{"name": "scaled", "params": {"scale": scale}, **entry}, "json-valid"],
            "cases": [{"id": f"c{i}", "input": {"id": i}} for i in range(8)],
            **({"verdict": verdict} if verdict else {})}


@pytest.fixture
def project(tmp_path):
    make_project(tmp_path, {"p": suite()}, target=TARGET, scorers=SCORERS)
    (tmp_path / "evalloop.toml").write_text("learn = false\ninject_failures = false\n")
    return tmp_path


def again(root, **kwargs):
    make_project(root, {"p": suite(**kwargs.pop("spec", {}))}, target=TARGET, scorers=SCORERS)
    return run_suite("p", settings=load_settings(root), **kwargs)


def test_each_part_is_stored_and_changes_alone(project):
    first = again(project)
    store = HistoryStore(load_settings(project).database_url)
    run = store.get_run(first.executed.run.id)
    summaries = store.summaries(run.id)
    assert run.product_fingerprint == identity.product_hash(identity.parse(run.fingerprint))
    assert summaries["scaled"].measurement and summaries["json-valid"].measurement
    assert summaries["scaled"].measurement != summaries["json-valid"].measurement  # a measurement is a scorer's

    prompt = again(project, spec={"prompt": "v2"})  # the product
    change = prompt.comparison.fingerprint_change
    assert change.product == ["target_params.prompt"] and change.measurement == {}
    assert prompt.executed.run.product_fingerprint != run.product_fingerprint
    assert all(s.window_runs == 1 for s in prompt.comparison.scorers)  # spans both products

    scale = again(project, spec={"prompt": "v2", "scale": 0.5})  # one scorer's measurement
    change = scale.comparison.fingerprint_change
    assert change.product == [] and change.measurement == {"scaled": ["params.scale"]}
    assert change.bridged == ["scaled"] and not change.restarted
    by = {s.scorer: s for s in scale.comparison.scorers}
    assert by["scaled"].baseline == pytest.approx(0.5) and by["scaled"].verdict == "steady"
    assert by["json-valid"].window_runs == 2  # its own measurement did not change: its own runs


def test_the_verdict_policy_is_neither_part(project):
    again(project)
    stricter = again(project, spec={"threshold": 0.05, "pass_mark": 0.9})
    change = stricter.comparison.fingerprint_change
    assert change is not None and change.product == [] and change.measurement == {}
    assert any("the verdict settings changed" in n for n in stricter.notices)
    assert not change.restarted and stricter.comparison.scorers[0].window_runs == 1
    assert stricter.extras.get("bridge") is None  # nothing re-graded


def test_bridge_false_in_the_suite_restarts_that_scorer(project):
    again(project)
    off = again(project, spec={"scale": 0.5, "verdict": {"bridge": False}})
    change = off.comparison.fingerprint_change
    assert change.measurement == {"scaled": ["params.scale"]} and change.bridged == [] and change.restarted
    assert off.comparison.scorers[0].verdict == "no baseline yet"
    assert off.extras.get("bridge") is None
