"""The queries that pick a run's baseline candidates: the last eligible runs before it, the
reference runs since the last acceptance, and the details of earlier summaries.

Eligibility itself has one definition (:mod:`evalloop.history.eligibility`); these queries only
narrow the candidates it is applied to.
"""

from __future__ import annotations

from collections.abc import Iterator

from sqlalchemy import select as core_select  # of whole tables (sqlmodel's select takes models)
from sqlmodel import select

from evalloop.history.details import AcceptedRecord, SummaryDetails, summary_details
from evalloop.history.models import Query, Run, RunStatus, ScorerSummary
from evalloop.history.rows import RUNS, SUMMARIES, as_models
from evalloop.history.storebase import StoreBase


class BaselineReads(StoreBase):
    """The store's reads of the runs a verdict compares a run with."""

    def baseline_runs(self, suite: str, scorer: str, before: Run, n: int, product: str | None = None, *,
                      measurement: str | None = None, measured_only: bool = False) -> list[tuple[Run, ScorerSummary]]:
        """The last ``n`` runs before ``before`` that may serve as this scorer's baseline: runs
        that had *completed* before it started (a run of another host that was still going
        when this one began is never its baseline, even once it completed).

        Oldest first. Eligibility has one definition (:func:`history.eligibility.baseline_eligible`);
        the query only narrows the candidates. With ``product``, only runs of that product (a
        baseline restarted when the product changed). With ``measurement``, only runs whose scorer
        was measured so: its own runs graded so, and *bridges* (earlier runs' outputs re-graded
        so); without, the product's own runs however measured, and no bridge. ``measured_only``:
        every run that measured the suite so (:func:`history.eligibility.measured`), whatever its
        verdict — the runs a drop's soundness is judged against.
        """
        from evalloop.history.eligibility import accepted, baseline_eligible, measured, of_measurement

        def takes(run: Run, summary: ScorerSummary) -> bool:
            if measured_only:
                return measured(run, summary) and of_measurement(run, summary, measurement)
            return baseline_eligible(run, summary, measurement=measurement)

        query = (
            _measured(_with_summaries(suite, scorer, before), measurement)
            .where((RUNS.c.started_at < before.started_at)
                   | ((RUNS.c.started_at == before.started_at) & (RUNS.c.id < before.id)),
                   RUNS.c.ended_at.is_(None) | (RUNS.c.ended_at <= before.started_at))
            .order_by(RUNS.c.started_at.desc(), RUNS.c.id.desc())
        )
        if product is not None:
            query = query.where(RUNS.c.product_fingerprint == product)
        found: list[tuple[Run, ScorerSummary]] = []
        with self.engine.connect() as conn:
            for run, summary in as_models(conn.execute(query.execution_options(yield_per=64)), Run, ScorerSummary):
                if takes(run, summary):
                    found.append((run, summary))
                    if len(found) >= n or accepted(summary) is not None:
                        break  # an accepted run is the oldest any later baseline reaches back to
                elif accepted(summary) is not None and run.bridge_of is None:
                    break  # ... measured otherwise (and not bridged) too
        return list(reversed(found))

    def reference_runs(self, suite: str, scorer: str, before: Run, n: int, *,
                       measurement: str | None = None) -> list[tuple[Run, ScorerSummary]]:
        """The first ``n`` eligible runs of this scorer since its last acceptance (or ever), oldest
        first: the reference a slow drift is measured from (see :mod:`evalloop.verdicts.baseline`);
        with ``measurement``, of the runs measured so (bridges included), as :meth:`baseline_runs`.

        Two short reads, whatever the length of the history: the last acceptance (a summary whose
        details carry one), then forward from it until ``n`` eligible runs are found."""
        from evalloop.history.eligibility import accepted, baseline_eligible

        candidates = _with_summaries(suite, scorer, before).where(RUNS.c.started_at <= before.started_at)
        query = _measured(candidates, measurement)
        found: list[tuple[Run, ScorerSummary]] = []
        with self.engine.connect() as conn:
            start: Run | None = None  # the last acceptance, however its run was measured
            marked = (_measured(candidates, None).where(SUMMARIES.c.accepted.is_(True))
                      .order_by(RUNS.c.started_at.desc(), RUNS.c.id.desc()))
            for run, summary in as_models(conn.execute(marked.execution_options(yield_per=16)), Run, ScorerSummary):
                if accepted(summary) is not None:  # completed and accepted: eligible, the first
                    start = run
                    break
            forward = query.order_by(RUNS.c.started_at, RUNS.c.id)
            if start is not None:
                forward = forward.where((RUNS.c.started_at > start.started_at)
                                        | ((RUNS.c.started_at == start.started_at) & (RUNS.c.id >= start.id)))
            rows = conn.execute(forward.execution_options(yield_per=max(n, 1)))
            for run, summary in as_models(rows, Run, ScorerSummary):
                if baseline_eligible(run, summary, measurement=measurement):
                    found.append((run, summary))
                    if len(found) >= n:
                        break
        return found

    def earlier_details(self, suite: str, scorer: str, before: Run, limit: int = 200) -> Iterator[SummaryDetails]:
        """The details of this scorer's summaries in the runs before ``before``, newest first, read
        one by one as the caller goes on (bridges left out: they are re-gradings, not nights); an
        accepted summary's (its ``accepted`` column) always holds its acceptance record."""
        query = (select(SUMMARIES.c.details, SUMMARIES.c.accepted).join(RUNS, SUMMARIES.c.run_id == RUNS.c.id)
                 .where(RUNS.c.suite == suite, SUMMARIES.c.scorer == scorer, RUNS.c.id != before.id,
                        RUNS.c.started_at <= before.started_at, RUNS.c.bridge_of.is_(None))
                 .order_by(RUNS.c.started_at.desc(), RUNS.c.id.desc()).limit(limit))
        # fetched a few rows at a time: each row's details are parsed as it is fetched, and a
        # caller (the last nightly chart) usually stops at the first
        with self.engine.connect() as conn:
            for details, was_accepted in conn.execute(query.execution_options(yield_per=8)):
                found = summary_details(details)
                if was_accepted and found.accepted is None:
                    found.accepted = AcceptedRecord()
                yield found


def _with_summaries(suite: str, scorer: str, before: Run) -> Query:
    """The completed runs of ``suite`` other than ``before``, each with its ``scorer`` summary."""
    return (core_select(RUNS, SUMMARIES).join(SUMMARIES, SUMMARIES.c.run_id == RUNS.c.id)
            .where(RUNS.c.suite == suite, SUMMARIES.c.scorer == scorer,
                   RUNS.c.status == RunStatus.COMPLETED, RUNS.c.id != before.id))


def _measured(query: Query, measurement: str | None) -> Query:
    """Runs whose scorer was measured as ``measurement`` says (unknown counts as the same), bridges
    included, and the product's accepted runs however measured (an acceptance bounds every
    window); without a measurement, the product's own runs (no bridge)."""
    if measurement is None:
        return query.where(RUNS.c.bridge_of.is_(None))
    return query.where(SUMMARIES.c.measurement.is_(None) | (SUMMARIES.c.measurement == measurement)
                       | (RUNS.c.bridge_of.is_(None) & SUMMARIES.c.accepted.is_(True)))

