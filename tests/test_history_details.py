"""A summary's details, a run's notes and its fingerprint are read in one place (issue #43):
history.details' models. Readers that parsed the JSON themselves each had their own fallbacks —
a details value that is not a JSON object, or whose pass mark is null, crashed some reports and
not others — and ``pass_mark`` fell back to 0.5 in six places."""

from __future__ import annotations

import ast
import re
from datetime import timedelta
from pathlib import Path

import pytest

from evalloop.history.details import PASS_MARK_FALLBACK, RunNotes, run_fingerprint, run_notes, summary_details
from evalloop.history.models import CaseResult, CaseScore, Run, ScorerSummary, utcnow
from evalloop.history.store import HistoryStore
from support.sqlitedb import sqlite_conn

SRC = Path(__file__).resolve().parents[1] / "src" / "evalloop"
#: what older or damaged rows hold in ``details``: a JSON value that is not an object; a null
#: pass mark and controls; text that is not JSON at all
ODD_DETAILS = ['[0.7]', '{"pass_mark": null, "controls": null}', '{"pass_mark": 0.5', '"text"']


def two_runs(tmp_path: Path, details: str) -> tuple[HistoryStore, Run, Run]:
    """Two completed runs of suite ``s``, scorer ``x`` graded 0.4/0.6 on four cases, the second's
    summary stored with ``details`` as its text (written as the older or damaged row held it)."""
    db = tmp_path / "h.db"
    store = HistoryStore(f"sqlite:///{db}")
    t0 = utcnow() - timedelta(hours=3)
    runs = []
    for i, values in enumerate(([0.6, 0.6, 0.4, 0.4], [0.4, 0.6, 0.6, 0.4])):
        run = store.begin_run(Run(id=f"r{i}", suite="s", started_at=t0 + timedelta(hours=i), n_cases=4))
        store.add_results([CaseResult(run_id=run.id, case_id=f"c{j}", output="o").model_dump(exclude={"id"})
                           for j in range(4)],
                          [CaseScore(run_id=run.id, case_id=f"c{j}", scorer="x", value=v).model_dump(exclude={"id"})
                           for j, v in enumerate(values)])
        summary = ScorerSummary(run_id=run.id, scorer="x", kind="heuristic", mean=0.5, n=4)
        store.finish_run(run.id, [summary], status="completed", ended_at=run.started_at + timedelta(minutes=1))
        runs.append(store.get_run(run.id))
    with sqlite_conn(db) as conn:
        conn.execute("UPDATE scorer_summaries SET details = ?", (details,))
    return store, runs[0], runs[1]


@pytest.mark.parametrize("details", ODD_DETAILS)
def test_every_report_reads_an_odd_details_value_through_the_model(tmp_path, details):
    from evalloop.report.cases import case_facts
    from evalloop.report.diff import diff_runs
    from evalloop.report.failures import failure_history
    from evalloop.report.trends import suite_trend

    store, a, b = two_runs(tmp_path, details)
    summary = store.summaries(b.id)["x"]
    assert summary_details(summary).pass_mark == PASS_MARK_FALLBACK and summary_details(summary).controls == []

    assert [d.pass_mark for d in diff_runs(store, a, b).scorers] == [PASS_MARK_FALLBACK]
    facts = {f.case_id: f for f in case_facts(store, b.id)}
    assert [facts[c].passed for c in ("c0", "c1", "c2", "c3")] == [False, True, True, False]
    failures = failure_history(store, "s")
    assert failures.runs == 2
    trend = suite_trend(store, "s")
    (scorer,) = trend.scorers
    assert scorer.pass_mark == PASS_MARK_FALLBACK and scorer.points[-1].accepted is None


def test_notes_and_fingerprints_that_are_not_objects_read_empty():
    assert run_notes("[1]") == RunNotes() and run_fingerprint('"text"') == {} and run_fingerprint("{") == {}
    assert run_notes('{"resumed_from": "r1", "target_stats": {"ms": 3}}').target_stats == {"ms": 3}
    # a field that does not read is its default; the others are kept
    notes = run_notes({"ablation": "inc-1", "resumed_from": "r1"})
    assert notes.ablation == [] and notes.resumed_from == "r1"


def test_a_json_column_holds_what_json_can_and_notes_are_redacted(tmp_path):
    """A run's notes are a dict in and a dict out: a value JSON has no type for is stored as its
    text, and a URL's credentials in any text of the notes are redacted as the text columns' are."""
    store = HistoryStore(f"sqlite:///{tmp_path / 'h.db'}")
    store.begin_run(Run(id="r1", suite="s", fingerprint={"target": "sut:fn", "where": Path("/x")}))
    store.finish_run("r1", [ScorerSummary(run_id="r1", scorer="x", kind="heuristic", details={"pass_mark": 0.7})],
                     status="completed", notes={"target_stats": {"endpoint": "https://user:hunter22@db.example/x"}})
    run = store.get_run("r1")
    assert run.fingerprint == {"target": "sut:fn", "where": "/x"}
    assert "hunter22" not in str(run.notes) and "db.example" in str(run_notes(run).target_stats)
    assert summary_details(store.summaries("r1")["x"]).pass_mark == 0.7


def _parses_stored_json(node: ast.Call) -> bool:
    """A ``json.loads(…)`` of something named details, notes or fingerprint."""
    func = node.func
    if not (isinstance(func, ast.Attribute) and func.attr == "loads" and isinstance(func.value, ast.Name)
            and func.value.id == "json" and node.args):
        return False
    return any(word in ast.unparse(node.args[0]) for word in ("details", "notes", "fingerprint"))


def test_no_reader_outside_history_parses_details_notes_or_fingerprints_itself():
    """Every reader outside history/ goes through history.details (its models and fallbacks)."""
    offenders = []
    for path in SRC.rglob("*.py"):
        if path.relative_to(SRC).parts[0] == "history":
            continue
        tree = ast.parse(path.read_text(), str(path))
        offenders += [f"{path.relative_to(SRC)}:{node.lineno}" for node in ast.walk(tree)
                      if isinstance(node, ast.Call) and _parses_stored_json(node)]
        offenders += [f"{path.relative_to(SRC)}:{n}" for n, line in enumerate(path.read_text().splitlines(), 1)
                      if re.search(r"[\"']pass_mark[\"'], *0\.5", line)]  # the fallback, a second time
    assert offenders == []
