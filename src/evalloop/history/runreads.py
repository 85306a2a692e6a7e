"""Reading the stored runs back: a run by id or prefix, a suite's runs newest first, their
count, the suites, and a run's scorer summaries."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import func
from sqlalchemy import select as core_select  # of whole tables (sqlmodel's select takes models)
from sqlmodel import col, select

from evalloop.history.models import Run, ScorerSummary
from evalloop.history.rows import RUNS, SUMMARIES, as_models, run_by_id
from evalloop.history.storebase import StoreBase


class RunReads(StoreBase):
    """The store's reads of runs and their summaries."""

    def get_run(self, run_id: str) -> Run | None:
        """A run by id or unique id prefix."""
        matches = self.find_runs(run_id, limit=2)
        return matches[0] if len(matches) == 1 else None

    def find_runs(self, ref: str, limit: int = 4) -> list[Run]:
        """The run with this exact id, else up to ``limit`` runs whose id starts with ``ref`` (a
        bridge only by its exact id)."""
        with self.engine.connect() as conn:
            exact = run_by_id(conn, ref)
            if exact is not None:
                return [exact]
            prefixed = conn.execute(core_select(RUNS).where(RUNS.c.id.startswith(ref, autoescape=True),
                                                            RUNS.c.bridge_of.is_(None))
                                    .order_by(RUNS.c.id).limit(limit))
            return [run for run, in as_models(prefixed, Run)]

    def runs(self, suite: str | None = None, limit: int | None = 20,
             statuses: Sequence[str] | None = None, *, bridges: bool = False) -> list[Run]:
        """Newest first; the product's runs only, unless ``bridges`` (re-gradings of earlier runs'
        outputs by a changed measurement, :mod:`evalloop.history.bridges`)."""
        query = select(Run)
        if not bridges:
            query = query.where(col(Run.bridge_of).is_(None))
        if suite:
            query = query.where(Run.suite == suite)
        if statuses:
            query = query.where(col(Run.status).in_(list(statuses)))
        query = query.order_by(col(Run.started_at).desc(), col(Run.id).desc())
        if limit:
            query = query.limit(limit)
        with self._reading() as session:
            return list(session.exec(query))

    def count_runs(self, suite: str | None = None) -> int:
        """How many runs are stored (of one suite; bridges not counted)."""
        query = select(func.count()).select_from(RUNS).where(RUNS.c.bridge_of.is_(None))
        if suite:
            query = query.where(RUNS.c.suite == suite)
        with self.engine.connect() as conn:
            return int(conn.execute(query).scalar_one())

    def suites(self) -> list[str]:
        with self.engine.connect() as conn:
            return sorted(conn.execute(select(RUNS.c.suite).distinct()).scalars())

    def summaries(self, run_id: str) -> dict[str, ScorerSummary]:
        with self.engine.connect() as conn:
            rows = conn.execute(core_select(SUMMARIES).where(SUMMARIES.c.run_id == run_id).order_by(SUMMARIES.c.id))
            return {summary.scorer: summary for summary, in as_models(rows, ScorerSummary)}
