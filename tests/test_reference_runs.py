"""The slow-drift reference (``HistoryStore.reference_runs``): the first ``n`` eligible runs since
the last acceptance, oldest first. It is read forward from that acceptance, so its cost does not
grow with the history; a Hypothesis test holds it to the plain definition (every run read newest
first back to the acceptance) over random histories of eligible, ineligible, failed and accepted
runs."""

from __future__ import annotations

import json
from datetime import timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalloop.history.eligibility import accepted, baseline_eligible
from evalloop.history.models import Run, RunStatus, ScorerSummary, utcnow
from evalloop.history.store import HistoryStore

#: one run: its status, whether its verdict keeps it out of baselines, whether it was accepted
RUN = st.tuples(st.sampled_from([RunStatus.COMPLETED] * 4 + [RunStatus.FAILED]), st.booleans(), st.booleans())


def write_history(store: HistoryStore, suite: str, plan: list[tuple[RunStatus, bool, bool]]) -> list[Run]:
    t0 = utcnow() - timedelta(days=len(plan) + 1)
    runs = []
    for i, (status, good, was_accepted) in enumerate(plan):
        run = store.begin_run(Run(id=f"{suite}-{i:03d}", suite=suite, started_at=t0 + timedelta(hours=i)))
        details = {"accepted": {"reason": "new normal"}} if was_accepted else {}
        summary = ScorerSummary(run_id=run.id, scorer="x", kind="heuristic", mean=0.9, n=4,
                                verdict="steady" if good else "regressed", eligible=good, details=details,
                                accepted=was_accepted or None)
        store.finish_run(run.id, [summary], status=status, ended_at=run.started_at + timedelta(minutes=1))
        runs.append(run)
    return runs


def reference_model(store: HistoryStore, suite: str, before: Run, n: int) -> list[str]:
    """The definition, read the long way: newest first back to (and with) the last acceptance."""
    found = []
    for run in sorted(store.runs(suite, limit=None), key=lambda r: (r.started_at, r.id), reverse=True):
        if run.id == before.id or run.started_at > before.started_at:
            continue
        summary = store.summaries(run.id).get("x")
        if baseline_eligible(run, summary):
            found.append(run.id)
            if summary is not None and accepted(summary) is not None:
                break
    return list(reversed(found))[:n]


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=st.lists(RUN, min_size=1, max_size=14), n=st.integers(1, 6), data=st.data())
def test_the_reference_is_the_first_eligible_runs_since_the_last_acceptance(tmp_path_factory, plan, n, data):
    store = HistoryStore(f"sqlite:///{tmp_path_factory.mktemp('h')}/h.db")
    runs = write_history(store, "s", plan)
    before = runs[data.draw(st.integers(0, len(runs) - 1))]
    got = [r.id for r, _ in store.reference_runs("s", "x", store.get_run(before.id), n)]
    assert got == reference_model(store, "s", before, n)


def test_an_acceptance_starts_the_reference_and_other_suites_never_enter_it(history_url):
    store = HistoryStore(history_url)
    write_history(store, "other", [(RunStatus.COMPLETED, True, False)] * 3)
    runs = write_history(store, "s", [(RunStatus.COMPLETED, True, False)] * 4
                         + [(RunStatus.COMPLETED, False, True)] + [(RunStatus.COMPLETED, True, False)] * 3)
    last = store.get_run(runs[-1].id)
    assert [r.id for r, _ in store.reference_runs("s", "x", last, 3)] == ["s-004", "s-005", "s-006"]
    assert [r.id for r, _ in store.reference_runs("s", "x", store.get_run("s-003"), 2)] == ["s-000", "s-001"]


def test_the_last_acceptance_is_found_by_its_column_not_by_text_in_json(history_url):
    """Accepted runs were found with ``details LIKE '%"accepted"%'`` (issue #43): a text search in
    JSON that matched any mention of the word. The ``accepted`` column says it; a summary whose
    details mention "accepted" without an acceptance is no acceptance."""
    from sqlalchemy import event

    store = HistoryStore(history_url)
    runs = write_history(store, "s", [(RunStatus.COMPLETED, True, False)] * 2 + [(RunStatus.COMPLETED, True, True)]
                         + [(RunStatus.COMPLETED, True, False)] * 2)
    mention = json.dumps({"evidence": {"reason": 'the "accepted" word in a reason'}, "accepted": None})
    store.update_summaries(runs[3].id, {"x": {"details": mention}})
    statements: list[str] = []
    spy = lambda conn, cursor, statement, *rest: statements.append(statement)  # noqa: E731
    event.listen(store.engine, "before_cursor_execute", spy)
    try:
        got = [r.id for r, _ in store.reference_runs("s", "x", store.get_run(runs[-1].id), 2)]
    finally:
        event.remove(store.engine, "before_cursor_execute", spy)
    assert got == ["s-002", "s-003"]
    assert not [s for s in statements if "LIKE" in s.upper()], statements
