"""The rolling window a stored verdict was judged against: the one window every reader shows.

When a run is judged, the verdict records on each scorer's summary the ids of the runs its
baseline was read from (``details["window"]``, oldest first; :mod:`evalloop.verdicts.baseline`).
A report reads them back here instead of rebuilding a window of its own, so its band, its
"previous run" and its window count are the verdict's — an acceptance, ``restart_on_change`` and
every rule of eligibility included. A row judged before the ids were recorded gets the window
the one rule reads (:meth:`HistoryStore.baseline_runs`), restarted where the verdict restarted.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import select

from evalloop.history.details import summary_details
from evalloop.history.models import Run, ScorerSummary
from evalloop.history.store import RUNS, SUMMARIES, HistoryStore, as_models

#: the key of ``ScorerSummary.details`` that holds the verdict's window (run ids, oldest first)
KEY = "window"


def recorded(details: Mapping[str, object]) -> list[str] | None:
    """The window ids a verdict recorded in a summary's details, or None (judged before they were)."""
    ids = details.get(KEY)
    return [str(i) for i in ids] if isinstance(ids, list) else None


def verdict_window(store: HistoryStore, run: Run, summary: ScorerSummary,
                   window: int) -> list[tuple[Run, ScorerSummary]]:
    """The runs (with this scorer's summaries), oldest first, that the verdict of ``summary``
    compared ``run`` with. ``window``: the window length for a row judged before the ids were
    recorded and without the count of its window runs."""
    details = summary_details(summary)
    ids = details.window
    if ids is None:
        if summary.skipped or summary.verdict is None:
            return []
        runs = details.evidence.get("window_runs", window)
        n = int(runs) if isinstance(runs, int | float) else 0
        restarted = details.fingerprint_change.get("restarted")
        return store.baseline_runs(run.suite, summary.scorer, run, n, run.product_fingerprint if restarted else None,
                                   measurement=summary.measurement) if n > 0 else []
    if not ids:
        return []
    query = (select(RUNS, SUMMARIES).join(SUMMARIES, SUMMARIES.c.run_id == RUNS.c.id)
             .where(SUMMARIES.c.scorer == summary.scorer, RUNS.c.id.in_(ids)))
    with store.engine.connect() as conn:
        found = {r.id: (r, s) for r, s in as_models(conn.execute(query), Run, ScorerSummary)}
    return [found[i] for i in ids if i in found]
