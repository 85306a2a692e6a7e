"""Reading a stored run's case rows back: per-case scores, score vectors, scorer messages,
scopes, errors, and every case result and score row."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from sqlmodel import col, select

from evalloop.history.models import CaseResult, CaseScore
from evalloop.history.rows import RESULTS, SCORES, VECTORS
from evalloop.history.storebase import StoreBase


class CaseReads(StoreBase):
    """The store's reads of one run's cases."""

    def case_scopes(self, run_id: str) -> dict[str, str]:
        """``case id → scope`` of a stored run's cases tagged ``scope:<id>`` (the first such tag):
        the clusters the run's verdict resamples. Empty when no case has a scope."""
        from evalloop.suites.models import SCOPE_TAG, scope_of

        query = (select(RESULTS.c.case_id, RESULTS.c.tags).distinct()
                 .where(RESULTS.c.run_id == run_id, RESULTS.c.tags.like(f"%{SCOPE_TAG}%")))
        out: dict[str, str] = {}
        with self.engine.connect() as conn:
            for case_id, tag_text in conn.execute(query):
                scope = scope_of((tag_text or "").split(","))
                if scope is not None:
                    out.setdefault(str(case_id), scope)
        return out

    def case_scores(self, run_id: str, scorer: str) -> dict[str, float]:
        """Per-case score of one scorer in one run: epochs averaged, errored/skipped left out."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(SCORES.c.case_id, SCORES.c.value)
                .where(SCORES.c.run_id == run_id, SCORES.c.scorer == scorer,
                       SCORES.c.errored.is_(False), SCORES.c.skipped.is_(False))
            ).all()
        sums: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
        for case_id, value in rows:
            acc = sums[case_id]
            acc[0] += value
            acc[1] += 1
        return {case_id: total / count for case_id, (total, count) in sums.items()}

    def score_vector(self, run_id: str, scorer: str, digest: str) -> bytes | None:
        """A run's stored score vector of one scorer for the case list ``digest``, if it has one."""
        with self.engine.connect() as conn:
            found = conn.execute(select(VECTORS.c.data).where(
                VECTORS.c.run_id == run_id, VECTORS.c.scorer == scorer, VECTORS.c.digest == digest).limit(1)).first()
        return None if found is None else bytes(found[0])

    def case_messages(self, run_id: str, scorer: str, case_ids: Iterable[str]) -> dict[str, str]:
        wanted = list(case_ids)
        if not wanted:
            return {}
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(SCORES.c.case_id, SCORES.c.message)
                .where(SCORES.c.run_id == run_id, SCORES.c.scorer == scorer, SCORES.c.case_id.in_(wanted))
            ).all()
        return {case_id: message for case_id, message in rows}

    def case_results(self, run_id: str) -> list[CaseResult]:
        """Every case result of a run (each epoch), in the order they were written."""
        with self._reading() as session:
            return list(session.exec(select(CaseResult).where(CaseResult.run_id == run_id)
                                     .order_by(col(CaseResult.id))))

    def score_rows(self, run_id: str) -> list[CaseScore]:
        """Every score of a run (each scorer and epoch), in the order they were written."""
        with self._reading() as session:
            return list(session.exec(select(CaseScore).where(CaseScore.run_id == run_id)
                                     .order_by(col(CaseScore.id))))

    def case_errors(self, run_id: str) -> dict[str, str]:
        """The cases of a run whose target call failed: case id → error (the last epoch's)."""
        with self.engine.connect() as conn:
            return dict(conn.execute(select(RESULTS.c.case_id, RESULTS.c.error).where(
                RESULTS.c.run_id == run_id, RESULTS.c.error.is_not(None)).order_by(RESULTS.c.id)).all())
