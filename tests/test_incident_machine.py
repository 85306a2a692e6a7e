"""The incident lifecycle as a state machine (issue #22): Hypothesis drives random sequences of
full, partial, errored, invalid, regressing, recovering, recurring and accepted runs through the
real pipeline (``run_suite`` on a real SQLite history and the real embedded memory store) and
checks every step against a small reference model of the table in
:mod:`evalloop.learning.incidents`.

The suite has 20 cases; the "break" flips c00..c05 from 1.0 to 0.0, and c19 fails on every run
(a chronic failure, failing in every baseline too). Whether a run *regressed* is the verdict's
business (its rules may change); the model takes it from the run's comparison and checks what the
lifecycle does with it.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from evalloop import load_settings
from evalloop.history import HistoryStore
from evalloop.learning import incidents as learning
from evalloop.learning import injection
from evalloop.memory.store import MemoryStore
from evalloop.verdicts.verdict import VerdictStatus
from support.incidents import BROKEN, CASES, SCORER, SUITE, project, run

CHRONIC = "c19"
CLOSED = ("resolved", "accepted")


class IncidentMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = tempfile.TemporaryDirectory()
        self.saved_env = os.environ.get("EVALLOOP_TEST_ANSWERS")
        self.root = project(Path(self.tmp.name))
        self.broken = False
        # the model: every incident record (id → status, remembered cases), newest seen first
        self.records: dict[str, dict[str, Any]] = {}
        self.current: str | None = None  # the record the scorer's state is read from
        self.last_run: str | None = None

    # -- the model -----------------------------------------------------------------------

    @property
    def state(self) -> str | None:
        return None if self.current is None else self.records[self.current]["status"]

    def answers(self, broken: bool, errored: list[str] = ()) -> dict[str, Any]:
        values: dict[str, Any] = {CHRONIC: 0.0}
        if broken:
            values.update(dict.fromkeys(BROKEN, 0.0))
        values.update(dict.fromkeys(errored, "infra"))
        return values

    def step(self, broken: bool, *, errored: list[str] = (), ran: list[str] = CASES, **kwargs: Any) -> None:
        """One real run, then the model's transition, then the action the pipeline reported."""
        values = self.answers(broken, errored)
        report = run(self.root, values, **kwargs)
        self.last_run = report.outcome.run.id
        s = report.comparison.scorers[0]
        graded = {c: (0.0 if values.get(c) == 0.0 else 1.0) for c in ran if values.get(c) != "infra"}
        failing = {c for c, v in graded.items() if v < 0.5}
        full = not report.outcome.run.partial
        valid = not report.comparison.invalid and s.status not in (VerdictStatus.INVALID, VerdictStatus.SKIPPED,
                                                                    VerdictStatus.SCORER_BROKEN)
        regressed = s.is_regression
        newly = [c for c, _ in s.newly_failing]
        event(f"run: {'full' if full else 'partial'}, {'valid' if valid else 'invalid'}, "
              f"{'errored, ' if errored and valid else ''}"
              f"{'regressed' if regressed else 'not regressed'}, from {self.state}")
        expected, record = None, self.current
        if valid and self.state != "open" and regressed:
            assert set(newly) <= set(BROKEN), newly              # c19 is never newly failing
            again = next((rid for rid, r in self.records.items()
                          if r["status"] in CLOSED and r["cases"] & set(newly)), None)
            expected = "reopened" if again else "opened"
            record = again
        elif valid and self.state == "open":
            cases = self.records[self.current]["cases"]
            if regressed or cases & failing:
                expected = "updated"
            elif full and all(c in graded and graded[c] >= 0.5 for c in cases):
                expected = "resolved"
        got = [m for m in report.extras.get("memories", []) if m["scorer"] == SCORER]
        assert [m["action"] for m in got] == ([expected] if expected else []), (got, expected, report.notices)
        if expected is None:
            return
        memory_id = got[0]["memory_id"]
        event(f"incident {expected}")
        if expected == "opened":
            assert memory_id not in self.records
            previous = next((rid for rid, r in self.records.items() if r["status"] in CLOSED), None)
            self.records = {memory_id: {"status": "open", "cases": set(newly), "runs": 1, "previous": previous},
                            **self.records}
        elif expected == "reopened":
            assert memory_id == record
            r = self.records.pop(memory_id)
            self.records = {memory_id: {**r, "status": "open", "cases": set(newly), "runs": r["runs"] + 1,
                                        "reopened": r.get("reopened", 0) + 1}, **self.records}
        elif expected == "updated":
            assert memory_id == self.current
            r = self.records.pop(memory_id)
            self.records = {memory_id: {**r, "cases": r["cases"] | set(newly), "runs": r["runs"] + 1},
                            **self.records}
        else:
            assert memory_id == self.current
            self.records[memory_id]["status"] = "resolved"
            self.records[memory_id]["resolved_run"] = self.last_run
        self.current = memory_id
        if self.state == "open" and full and valid:  # an open incident keeps the run out of the baseline
            summary = HistoryStore(load_settings(self.root).database_url).summaries(self.last_run)[SCORER]
            assert summary.eligible is False

    # -- the rules -----------------------------------------------------------------------

    @initialize()
    def good_history(self) -> None:
        for _ in range(3):
            self.step(False)

    @rule()
    def regress(self) -> None:
        """A full run with the break in (again, or for the first time)."""
        self.broken = True
        self.step(True)

    @rule()
    def recover(self) -> None:
        """A full run with the break fixed."""
        self.broken = False
        self.step(False)

    @rule(how=st.sampled_from(["only broken", "all but broken", "limit"]))
    def partial(self, how: str) -> None:
        """-k/--tag (only the broken cases, or every case but them) or --limit 10 (c00..c09)."""
        if how == "limit":
            self.step(self.broken, ran=CASES[:10], limit=10)
            return
        ran = BROKEN if how == "only broken" else [c for c in CASES if c not in BROKEN]
        self.step(self.broken, ran=ran, select=lambda case: case.id in ran)

    @rule(fixed=st.booleans(), n=st.sampled_from([1, 2, 4, 10]))
    def errored(self, fixed: bool, n: int) -> None:
        """The first n of c00.. hit infrastructure errors: up to 4 of 20 is within the 20 % limit
        (a valid run whose errored cases were not graded), 10 makes the run invalid."""
        if fixed:
            self.broken = False
        self.step(self.broken, errored=CASES[:n])

    @rule()
    def accept(self) -> None:
        with MemoryStore(load_settings(self.root).memory_file) as store:
            ids = learning.accept_incidents(store, SUITE, None, "intended new normal", self.last_run)
        if self.state == "open":
            assert ids == [self.current]
            self.records[self.current]["status"] = "accepted"
        else:
            assert ids == []

    # -- the checks ----------------------------------------------------------------------

    @invariant()
    def stored_states_match_the_model(self) -> None:
        settings_ = load_settings(self.root)
        if not settings_.memory_file.exists():
            assert self.records == {}
            return
        with MemoryStore(settings_.memory_file) as store:
            stored = {r.id: r for r in learning.incidents(store, SUITE, status=None)}
        assert set(stored) == set(self.records)                    # none dropped, none doubled
        assert sum(r.metadata["status"] == "open" for r in stored.values()) <= 1
        for rid, model in self.records.items():
            meta = stored[rid].metadata
            assert meta["status"] == model["status"] and f"status:{model['status']}" in stored[rid].tags
            assert set(meta["failing_cases"]) == model["cases"] and CHRONIC not in meta["failing_cases"]
            assert set(meta.get("chronic_cases") or []) <= {CHRONIC}
            assert meta["runs_seen"] == model["runs"]
            assert meta.get("reopened", 0) == model.get("reopened", 0)
            assert meta.get("previous_id") == model["previous"]
            if model["status"] == "resolved":
                assert meta["resolved_run_id"] == model["resolved_run"]
        injected, notice = injection.injected_for(settings_, SUITE)
        assert notice is None
        assert injected.memory_ids == ([self.current] if self.state == "open" else [])

    def teardown(self) -> None:
        if self.saved_env is None:
            os.environ.pop("EVALLOOP_TEST_ANSWERS", None)
        else:
            os.environ["EVALLOOP_TEST_ANSWERS"] = self.saved_env
        self.tmp.cleanup()


IncidentMachine.TestCase.settings = settings(max_examples=15, stateful_step_count=10, derandomize=True,
                                             deadline=None, suppress_health_check=[HealthCheck.too_slow])
test_incident_lifecycle_machine = IncidentMachine.TestCase
