"""A baseline uses only runs that had completed before the current run started (issue #28): two
first runs of one suite started together on two hosts never take each other as baseline."""

from __future__ import annotations

from datetime import timedelta

from evalloop.history.models import Run, RunStatus, ScorerSummary, utcnow
from evalloop.history.store import HistoryStore


def finish(store: HistoryStore, run: Run, mean: float, ended_at) -> None:
    store.finish_run(run.id, [ScorerSummary(run_id=run.id, scorer="x", kind="heuristic", mean=mean, n=4)],
                     status=RunStatus.COMPLETED, ended_at=ended_at)


def test_a_run_that_ended_after_the_current_one_started_is_not_its_baseline(history_url):
    store = HistoryStore(history_url)
    t0 = utcnow()
    first = store.begin_run(Run(id="r1", suite="s", started_at=t0))
    second = store.begin_run(Run(id="r2", suite="s", started_at=t0 + timedelta(seconds=1)))
    finish(store, first, 0.9, t0 + timedelta(seconds=5))  # completes while the second one runs
    finish(store, second, 0.5, t0 + timedelta(seconds=6))
    assert store.baseline_runs("s", "x", store.get_run("r2"), 5) == []
    third = store.begin_run(Run(id="r3", suite="s", started_at=t0 + timedelta(seconds=7)))
    assert [r.id for r, _ in store.baseline_runs("s", "x", third, 5)] == ["r1", "r2"]
    finish(store, third, 0.7, t0 + timedelta(seconds=8))  # its lease's heartbeat ends with the run
