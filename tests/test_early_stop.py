"""Early stop: a judge suite's judges grade random batches and stop once the verdict is settled.

The boundaries are checked against the published Lan–DeMets values and, by seeded simulation of
the statistic they bound, against the error they spend. The runs are real: the ``anthropic`` SDK
against the loopback judge, real SQLite; the judge's grade depends only on the case (and on
whether the product is changed), so an unchanged run's verdict is settled at the first look.
False alarms and detection over many runs are measured by ``bench/early_stop.py``.
"""

from __future__ import annotations

import hashlib
import os

import numpy as np
import pytest

from evalloop import RunOptions
from evalloop.config import load_settings
from evalloop.history.store import HistoryStore
from evalloop.loop.pipeline import arun_suite
from evalloop.policy import VerdictPolicy
from evalloop.suites.models import Suite
from evalloop.verdicts.early_stop import efficacy_bounds, futility_bounds, look
from support.messages_server import LLMServer, Reply, Seen


def test_the_efficacy_bounds_are_the_published_ones():
    assert efficacy_bounds(4, 0.05, "obrien-fleming") == pytest.approx((4.3326, 2.9631, 2.3590, 2.0141), abs=2e-3)
    assert efficacy_bounds(2, 0.05, "obrien-fleming") == pytest.approx((2.9626, 1.9686), abs=2e-3)
    assert efficacy_bounds(4, 0.05, "obrien-fleming")[0] == pytest.approx(4.3326, abs=1e-3)  # a side's α(¼) exactly


@pytest.mark.parametrize("kind", ["obrien-fleming", "pocock"])
def test_the_bounds_spend_what_they_say(kind):
    rng = np.random.default_rng(7)
    looks, paths = 4, 200_000
    steps = rng.standard_normal((paths, looks)) / np.sqrt(looks)
    t = np.arange(1, looks + 1) / looks
    z0 = np.cumsum(steps, axis=1) / np.sqrt(t)
    e = np.array(efficacy_bounds(looks, 0.05, kind))
    assert np.mean((np.abs(z0) >= e).any(axis=1)) == pytest.approx(0.05, abs=0.003)
    drift = 3.0
    z1 = np.cumsum(steps + drift / looks, axis=1) / np.sqrt(t)
    f = np.array(futility_bounds(looks, 0.02, drift, kind))
    assert np.mean((z1[:, :-1] <= f[:-1]).any(axis=1)) <= 0.02 + 0.002  # stops before the end, under the drop


def test_a_look_stops_for_no_change_or_a_shown_regression_and_goes_on_otherwise():
    rng = np.random.default_rng(1)
    policy = VerdictPolicy(threshold=0.2, min_score=0.7)
    noise = rng.normal(0, 0.1, 50)
    current = np.clip(0.8 + rng.normal(0, 0.1, 50), 0, 1)
    assert look(1, 4, noise, 0.8, current, policy).stop == "no change"
    assert look(1, 4, noise + 0.4, 0.8, current - 0.4, VerdictPolicy(threshold=0.2, min_score=0)).stop == "regressed"
    assert look(1, 4, noise + 0.12, 0.8, current, policy).stop is None  # a drop near the threshold: go on
    assert look(1, 4, noise, 0.8, np.full(50, 0.7) + rng.normal(0, 0.05, 50), policy).stop is None  # at the floor
    assert look(4, 4, noise, 0.8, current, policy).stop is None  # the last look is the whole suite
    assert look(1, 4, noise[:5], 0.8, current[:5], policy).stop is None  # too few cases


# -- through real runs ---------------------------------------------------------------------------
def _grade(text: str) -> int:
    return 80 + int(hashlib.sha256(text.encode()).hexdigest(), 16) % 15  # 80..94, by the case alone: far from the floor


def judge(lowered: int):
    def answer(seen: Seen) -> Reply:
        return Reply.of_tool({"score": _grade(seen.last_user_text) - lowered, "issues": [], "strengths": []})
    return answer


def judged_suite(n: int, early_stop: object = True) -> Suite:
    cases = [{"id": f"c{i:03d}", "input": f"question {i}", "expected": f"answer {i}"} for i in range(n)]
    return Suite.model_validate({"name": "judged", "target": "sut:echo", "cases": cases, "early_stop": early_stop,
                                 "scorers": [{"name": "llm-rubric", "params": {"rubric": "Is it right?"}}]})


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "sut.py").write_text("def echo(input):\n    return 'said ' + input\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in list(os.environ):
        if name.startswith(("ANTHROPIC_", "EVALLOOP_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
    return tmp_path


async def test_an_unchanged_judge_suite_stops_at_the_first_look_and_a_changed_one_is_still_caught(project,
                                                                                                monkeypatch):
    settings = load_settings(project)
    suite = judged_suite(200)
    with LLMServer(judge(0)) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        first = await arun_suite(suite, RunOptions(cache="off"),
                                 settings=settings)  # no baseline yet: every case judged
        assert server.count == 200
        again = await arun_suite(suite, RunOptions(cache="off"), settings=settings)
        assert server.count == 250  # one look of four
        server.responder = judge(40)  # the product got worse: every grade 40 points lower
        worse = await arun_suite(suite, RunOptions(cache="off"), settings=settings)
    assert first.comparison.scorers[0].status == "no baseline yet"
    run = again.executed.run
    assert run.valid and not run.partial and again.comparison.scorers[0].status == "steady"
    assert again.executed.summaries["llm-rubric"].n == 50
    assert any(n.startswith("early stop: llm-rubric graded 50 of 200 cases (150 judge calls saved)")
               for n in again.notices)
    store = HistoryStore(settings.database_url)
    assert "early_stop" in store.get_run(run.id).notes
    assert worse.comparison.scorers[0].status == "regressed"
    assert worse.executed.summaries["llm-rubric"].n == 50  # a drop this clear is settled at once too


async def test_controls_are_always_graded_and_a_broken_judge_is_caught(project, monkeypatch):
    settings = load_settings(project)
    cases = [{"id": f"c{i:03d}", "input": f"question {i}", "expected": f"answer {i}"} for i in range(117)]
    cases += [{"id": f"bad{i}", "input": f"question {i}", "expected": f"answer {i}", "expect": "fail",
               "output": f"WRONG {i}"} for i in range(3)]  # negative controls with fixed outputs
    suite = Suite.model_validate({"name": "judged", "target": "sut:echo", "cases": cases, "early_stop": True,
                                  "scorers": [{"name": "llm-rubric", "params": {"rubric": "Is it right?"}}]})

    def judge_with_controls(passes: bool):
        def answer(seen: Seen) -> Reply:
            if "WRONG" in seen.last_user_text:
                return Reply.of_tool({"score": 90 if passes else 10, "issues": [], "strengths": []})
            return judge(0)(seen)
        return answer

    with LLMServer(judge_with_controls(passes=False)) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        await arun_suite(suite, RunOptions(cache="off"), settings=settings)  # a sound judge: a baseline
        server.responder = judge_with_controls(passes=True)  # the judge breaks
        report = await arun_suite(suite, RunOptions(cache="off"), settings=settings)
    assert report.comparison.scorers[0].status == "scorer broken"  # caught, though most cases went unjudged
    judged = HistoryStore(settings.database_url).case_scores(report.executed.run.id, "llm-rubric")
    assert {"bad0", "bad1", "bad2"} <= set(judged) and len(judged) < 120
