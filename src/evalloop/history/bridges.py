"""Bridges: an earlier run's stored outputs re-graded by a changed measurement, kept as a run of its own.

When a scorer's measurement changes (a judge model, a rubric, the scorer's code:
:mod:`evalloop.history.identity`) the baseline runs' scores were measured otherwise. A *bridge*
re-grades such a run's stored outputs with the current measurement and is stored as a run row
whose ``bridge_of`` names the original: the original's times, product fingerprint and counts; for
each re-graded scorer a summary measured the new way, its case scores and its score vector; the
re-grading's LLM usage and cost. It is a baseline only of that measurement
(:func:`evalloop.history.eligibility.baseline_eligible`), is never listed with the suite's runs
(``HistoryStore.runs``), and takes the place of its original in a baseline read under the new
measurement (``HistoryStore.baseline_runs``). The re-grading itself is
:mod:`evalloop.run.bridge`'s; which runs to bridge, :mod:`evalloop.verdicts.identity`'s.

A run whose outputs were never stored (imported from a run log) or are incomplete or unreadable
cannot be bridged: :func:`stored_outputs` says why.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence

from pydantic import BaseModel
from sqlalchemy import insert, select
from sqlalchemy.exc import IntegrityError

from evalloop.history.details import JSONValue
from evalloop.history.identity import stable_hash
from evalloop.history.models import CaseResult, Run, ScorerSummary, ScoreVector
from evalloop.history.rows import insert_all
from evalloop.history.store import RUNS, SCORES, SUMMARIES, HistoryStore, mapped


class BridgeRecord(BaseModel):
    """One earlier run re-graded for this run's baseline (or why it could not be)."""

    run: str  # the original run
    bridge: str | None = None  # the bridge's run id; None when it could not be made
    scorers: list[str]
    llm_calls: int = 0
    cache_hits: int = 0
    cost_usd: float = 0.0
    reason: str = ""  # why the run could not be bridged (outputs not stored, ...)

    @property
    def made(self) -> bool:
        return self.bridge is not None


def bridge_id(original: str, measurements: Mapping[str, str]) -> str:
    """The id of the bridge of ``original`` to these scorers' measurements (the same every time:
    a bridge made once is found, not made again)."""
    return f"{original}~b{stable_hash(sorted(measurements.items()))[:8]}"


@mapped
def bridged(store: HistoryStore, originals: Iterable[str], scorer: str, measurement: str) -> set[str]:
    """Which of ``originals`` already have a bridge that re-graded ``scorer`` as ``measurement`` says."""
    wanted = list(originals)
    if not wanted:
        return set()
    query = (select(RUNS.c.bridge_of).join(SUMMARIES, SUMMARIES.c.run_id == RUNS.c.id)
             .where(RUNS.c.bridge_of.in_(wanted), SUMMARIES.c.scorer == scorer,
                    SUMMARIES.c.measurement == measurement))
    with store.engine.connect() as conn:
        return {str(r) for r in conn.execute(query).scalars()}


def stored_outputs(store: HistoryStore, run: Run) -> list[tuple[CaseResult, JSONValue]] | str:
    """Every case result of ``run`` with its output read back, in the order they were written; or
    why the run's outputs cannot be re-graded (never stored, incomplete, unreadable)."""
    if run.origin == "log":
        return "its outputs were never stored (imported from the run log, which keeps scores only)"
    results = store.case_results(run.id)
    expected = (run.n_cases or 0) * (run.epochs or 1)
    if not results:
        return "no outputs of it are stored"
    if len(results) < expected:
        return f"only {len(results)} of its {expected} outputs are stored"
    out: list[tuple[CaseResult, JSONValue]] = []
    for result in results:
        if result.error is not None:  # the target failed: graded as the run graded it, not re-read
            out.append((result, None))
            continue
        if result.output is None:
            return f"the output of case '{result.case_id}' is not stored"
        try:
            out.append((result, json.loads(result.output)))
        except ValueError:
            return f"the output of case '{result.case_id}' is not readable (damaged or truncated)"
    return out


@mapped
def write_bridge(store: HistoryStore, run: Run, summaries: Sequence[ScorerSummary],
                 vectors: Sequence[ScoreVector], scores: Sequence[Mapping[str, object]]) -> bool:
    """Store a bridge run with its summaries, score vectors and case scores, in one transaction;
    False when it is there already (made by another process)."""
    try:
        with store.engine.begin() as conn:
            conn.execute(insert(RUNS), run.model_dump())
            insert_all(conn, list(summaries))
            insert_all(conn, list(vectors))
            if scores:
                conn.execute(insert(SCORES), [dict(s) for s in scores])
    except IntegrityError:
        return False
    return True
