"""Incidents with hysteresis on a noisy judge (issue #36, finding 5), through real nightly runs.

The judge suite of the issue: 50 cases, quality q ~ Beta(6, 2), a night's grade
clip(q·(1 − drop) + N(0, 0.2), 0, 1), pass mark 0.5, the floor off. Before, an incident
remembered every newly failing case of every night and resolved only when all of them passed in
one run: after a fixed 3-night drop most incidents stayed open for weeks, growing on noise. Now
a case joins only when it fails consistently, and the incident resolves when its cases are back
to their level before it, with evidence. ``bench/incidents.py`` measures the rates over many
trials; these tests pin a few seeded ones.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from evalloop import RunOptions, load_settings, run_suite
from evalloop.learning import incidents as learning
from evalloop.memory.store import MemoryStore
from support.project import make_project

N = 50
TARGET = '''
import json, os

def answers(input):
    with open(os.environ["EVALLOOP_TEST_GRADES"]) as f:
        return json.load(f)[input["id"]]

def reader(input, lessons=""):
    """The same grades, for a target that reads its lessons (they change nothing)."""
    return answers(input)
'''
SCORERS = '''
from evalloop import Score, scorer

@scorer("judge", kind="llm_judge")
def judge(input, output, expected):
    return Score(value=float(output))
'''


class Judged:
    """A noisy judge suite with its own seed, run night by night."""

    def __init__(self, root: Path, seed: int, monkeypatch, *, target: str = "answers", every: int = 1) -> None:
        suite = {"name": "judged", "target": f"sut:{target}", "scorers": [{"name": "judge", "min_score": 0}],
                 "holdout": 0, "ablation_every": every,
                 "cases": [{"id": f"c{i:02d}", "input": {"id": f"c{i:02d}"}} for i in range(N)]}
        self.root = make_project(root, {"judged": suite}, target=TARGET, scorers=SCORERS)
        (root / "evalloop.toml").write_text("run_log = false\n")
        self.grades = root / "grades.json"
        monkeypatch.setenv("EVALLOOP_TEST_GRADES", str(self.grades))
        monkeypatch.syspath_prepend(str(root))
        self.settings = load_settings(root)
        self.rng = np.random.default_rng(seed)
        self.q = self.rng.beta(6, 2, size=N)

    def night(self, drop: float) -> list[str]:
        values = np.clip(self.q * (1 - drop) + self.rng.normal(0, 0.2, N), 0, 1)
        self.grades.write_text(json.dumps({f"c{i:02d}": float(v) for i, v in enumerate(values)}))
        report = run_suite("judged", RunOptions(nightly=True), settings=self.settings)
        moved = [*(report.extras.get("memories") or []), *((report.extras.get("ablation") or {}).get("memories") or [])]
        return [m["action"] for m in moved]

    def remembered(self) -> int:
        with MemoryStore(self.settings.memory_file) as store:
            found = learning.incidents(store, "judged", status=None)
        (incident,) = [r for r in found if r.metadata["status"] in ("open", "held", "promoted")]
        return len(incident.metadata["failing_cases"])


def test_a_fixed_drop_on_a_noisy_judge_resolves_within_three_good_nights(tmp_path, monkeypatch):
    resolved_after = {}
    for seed in range(100, 106):
        suite = Judged(tmp_path / f"s{seed}", seed, monkeypatch)
        for _ in range(5):
            suite.night(0.0)
        if not [a for _ in range(3) for a in suite.night(0.15) if a == "opened"]:
            continue                                                     # the drop was not caught
        resolved_after[seed] = next((k + 1 for k in range(6) if "resolved" in suite.night(0.0)), None)
    assert len(resolved_after) >= 4, resolved_after
    assert all(n is not None and n <= 3 for n in resolved_after.values()), resolved_after


def test_an_incident_on_an_unchanged_noisy_suite_does_not_grow(tmp_path, monkeypatch):
    """A lesson-reading target with ablations off keeps its incident held, night after night: the
    remembered cases are those of the opening night, give or take a case that really keeps failing."""
    suite = Judged(tmp_path, 7, monkeypatch, target="reader", every=0)
    for _ in range(5):
        suite.night(0.0)
    assert suite.night(0.30) == ["opened"]
    at_open = suite.remembered()
    states = [suite.night(0.0) for _ in range(12)]
    assert suite.remembered() <= at_open + 2, (at_open, suite.remembered(), states)
    # the lesson "holds" it (never checked) from the first green night: the night after the drop
    # may still be red, as a nightly alarm lasts while a night still drops by half its reference value
    first = next((i for i, moved in enumerate(states) if moved != ["updated"]), 99)
    assert first <= 1 and states[first] == ["held"], states


@pytest.mark.xfail(strict=True, reason="verdicts/ (the lead's, issue #36): the nightly alarm lasts while a night's own "
                   "standardized drop is at least half the chart's reference value (k/2 = 0.75), and a fixed product "
                   "reaches that on about one good night in five against the frozen baseline; a good night judged "
                   "`regressed` is a trigger, so no incident can resolve on it")
def test_a_fixed_drop_is_not_kept_red_for_three_good_nights(tmp_path, monkeypatch):
    """The late trials of ``bench/incidents.py`` (scenario ``fixed``): in 5 of its 10 incidents
    not resolved within three good nights the verdict itself was ``regressed`` on all three,
    though the product was fixed. This seed is one: the baseline (the 5 warm runs) is 0.752 against
    a true mean of 0.735, the good nights score 0.694–0.717 (z 1.4–2.0; their own drop is
    significant on one of them), and the chart stays red until the fifth good night. The learning
    step cannot resolve an incident on a red night (a trigger opens or updates it), so the incident
    waits for the verdict."""
    suite = Judged(tmp_path, 178, monkeypatch)
    for _ in range(5):
        suite.night(0.0)
    assert [a for _ in range(3) for a in suite.night(0.15) if a == "opened"] == ["opened"]
    after = [suite.night(0.0) for _ in range(3)]
    assert any("resolved" in moved for moved in after), after
