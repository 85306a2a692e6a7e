"""A throwaway evalloop project that ``bench/verdicts.py`` drives through real runs.

Real suite files (rewritten before each run: cases, ``verdict: {rule: …}``), a target that
answers each case with the score the simulation drew for it, project scorers of the two kinds
the bench needs (a pass/fail ``heuristic`` and an ``llm_judge``), ``run_suite`` and a real SQLite
history. The history can be saved and restored (SQLite's backup API), so one simulated window of
earlier runs serves several current runs: each rule and each true drop is judged against the very
same window, the way a user's next run would be.
"""

from __future__ import annotations

import json
import sqlite3
import textwrap
from collections.abc import Mapping, Sequence
from contextlib import closing
from pathlib import Path

import yaml

from evalloop import load_settings, run_suite
from evalloop.history import HistoryStore
from evalloop.run.services import build_services
from evalloop.scoring.registry import discover
from evalloop.verdicts.baseline import ScorerComparison

TARGET = '''
import json

def answers(input, path):
    """The score the simulation drew for this case in this run."""
    with open(path) as f:
        return json.load(f)[input["id"]]
'''

SCORERS = '''
from evalloop import Score, scorer

@scorer("pass-fail", kind="heuristic")
def pass_fail(input, output, expected):
    """A case that passes (1) or fails (0); heuristic threshold 10 %."""
    return Score(value=float(output))

@scorer("judge", kind="llm_judge")
def judge(input, output, expected):
    """A judge's grade in [0, 1]; llm_judge threshold 20 %."""
    return Score(value=float(output))
'''

SUITE = "lab"


class Lab:
    """One project directory, one suite, one history database; runs go through ``run_suite``."""

    def __init__(self, root: Path, scorer: str) -> None:
        self.root, self.scorer = root, scorer
        (root / "fixtures").mkdir(parents=True, exist_ok=True)
        (root / "scorers").mkdir(exist_ok=True)
        (root / "sut.py").write_text(textwrap.dedent(TARGET))
        (root / "scorers" / "lab_scorers.py").write_text(textwrap.dedent(SCORERS))
        (root / "evalloop.toml").write_text("run_log = false\nlearn = false\n")
        self.answers = root / "answers.json"
        self.settings = load_settings(root)
        self.registry = discover(root)
        self.services, _ = build_services(self.settings, engine="local")  # no LLM: built once
        self.db = root / "history" / "evalloop.db"
        HistoryStore(self.settings.database_url)  # creates the tables, and a first run the rest
        self.run({"warm-up": 1.0}, suite="warm-up")  # (leases); its history is another suite's
        self.empty = self.save()

    def save(self) -> sqlite3.Connection:
        """The history as it is now, held in memory."""
        snapshot = sqlite3.connect(":memory:")
        with closing(sqlite3.connect(self.db)) as source:
            source.backup(snapshot)
        return snapshot

    def restore(self, snapshot: sqlite3.Connection) -> None:
        """Put a saved history back (the evalloop engine's own connections see it at once)."""
        with closing(sqlite3.connect(self.db)) as target:
            snapshot.backup(target)

    def reset(self) -> None:
        self.restore(self.empty)

    def run(self, scores: Mapping[str, float], rule: str = "evidence",
            cases: Sequence[str] | None = None, suite: str = SUITE) -> ScorerComparison:
        """One real run of the suite whose target answers ``scores``; its scorer's comparison."""
        ids = list(cases if cases is not None else scores)
        spec = {"name": suite, "target": {"ref": "sut:answers", "params": {"path": str(self.answers)}},
                 "scorers": [self.scorer], "verdict": {"rule": rule},
                 "cases": [{"id": c, "input": {"id": c}} for c in ids]}
        (self.root / "fixtures" / f"{suite}.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
        self.answers.write_text(json.dumps({c: float(scores[c]) for c in ids}))
        report = run_suite(suite, settings=self.settings, registry=self.registry, services=self.services)
        return report.comparison.scorers[0]
