"""Per-stratum means of a stored run: macro means of every scorer per case tag, and latency.

A retrieval suite tags each query with its stratum (``exact``, ``paraphrase``, ``multihop``…),
a QA suite with its category; any suite may tag its cases. A case's score is averaged over
epochs first; a stratum's mean is the mean over its cases (macro over queries), and ``macro``
is the unweighted mean of the stratum means. Tags ``scope:<id>`` (a scoped dataset's
conversation, user or session) are reported apart, one row per scope, with their own macro
mean (the per-conversation average the memory-benchmark papers report). Errored and skipped scores are left out, and so
are a scorer's known-bad control cases, as in its run mean (so ``overall`` equals the mean the
run's verdict table shows).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

import numpy as np
from pydantic import BaseModel, Field
from sqlalchemy import text

from evalloop.history.details import summary_details
from evalloop.history.store import HistoryStore
from evalloop.suites.models import SCOPE_TAG

_ROWS = text(
    "SELECT s.case_id, s.scorer, s.value, r.tags FROM case_scores s "
    "JOIN case_results r ON r.run_id = s.run_id AND r.case_id = s.case_id AND r.epoch = s.epoch "
    "WHERE s.run_id = :run AND s.errored = 0 AND s.skipped = 0"
)
MAX_SCOPE_ROWS = 20
"""At most this many scopes are shown in a table (the lowest first); JSON output holds them all."""
_LATENCY = text("SELECT latency_ms FROM case_results WHERE run_id = :run AND error IS NULL")


class StratumRow(BaseModel):
    """One tag: how many cases carry it and each scorer's mean over them."""

    tag: str
    n: int
    means: dict[str, float | None]


class StrataReport(BaseModel):
    """Every scorer of one run, overall (mean over cases) and per tag."""

    run_id: str
    scorers: list[str]
    n: int
    overall: dict[str, float | None]
    macro: dict[str, float | None]
    strata: list[StratumRow]
    scopes: list[StratumRow] = Field(default_factory=list)
    scope_macro: dict[str, float | None] = Field(default_factory=dict)

    def lowest_scopes(self, limit: int) -> list[StratumRow]:
        """At most ``limit`` scopes, the lowest by the first scorer first (all when fewer)."""
        if len(self.scopes) <= limit:
            return self.scopes
        first = self.scorers[0] if self.scorers else None
        return sorted(self.scopes, key=lambda r: (r.means.get(first) if first else 0.0) or 0.0)[:limit]

    def mean(self, tag: str, scorer: str) -> float | None:
        """The mean of ``scorer`` over the cases tagged ``tag``."""
        for row in self.strata:
            if row.tag == tag:
                return row.means.get(scorer)
        raise KeyError(tag)


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


def strata_means(store: HistoryStore, run_id: str, *, tags: Iterable[str] | None = None,
                 order: Sequence[str] = ()) -> StrataReport:
    """Macro means per tag of every scorer of a run (``tags`` restricts which tags are shown;
    scorers named in ``order`` come first, in that order)."""
    per_case: dict[tuple[str, str], list[float]] = defaultdict(list)
    case_tags: dict[str, list[str]] = {}
    with store.engine.connect() as conn:
        for case_id, scorer, value, tag_text in conn.execute(_ROWS, {"run": run_id}):
            per_case[(case_id, scorer)].append(float(value))
            case_tags[case_id] = [t for t in (tag_text or "").split(",") if t]
    for scorer, summary in store.summaries(run_id).items():
        controls = set(summary_details(summary).controls)
        for case_id in controls:
            per_case.pop((case_id, scorer), None)
    found = {s for _, s in per_case}
    scorers = [s for s in order if s in found] + sorted(found - set(order))
    case_value = {key: float(np.mean(v)) for key, v in per_case.items()}
    wanted = set(tags) if tags is not None else None
    members: dict[str, set[str]] = defaultdict(set)
    for case_id, labels in case_tags.items():
        for tag in labels:
            if wanted is None or tag in wanted:
                members[tag].add(case_id)
    rows, scopes = [], []
    for tag in sorted(members):
        cases = members[tag]
        means = {s: _mean([case_value[(c, s)] for c in cases if (c, s) in case_value]) for s in scorers}
        if tag.startswith(SCOPE_TAG):
            scopes.append(StratumRow(tag=tag[len(SCOPE_TAG):], n=len(cases), means=means))
        else:
            rows.append(StratumRow(tag=tag, n=len(cases), means=means))
    overall = {s: _mean([v for (c, sc), v in case_value.items() if sc == s]) for s in scorers}

    def macro(of: list[StratumRow]) -> dict[str, float | None]:
        return {s: _mean([m for r in of if (m := r.means[s]) is not None]) for s in scorers}

    return StrataReport(run_id=run_id, scorers=scorers, n=len(case_tags), overall=overall,
                        macro=macro(rows), strata=rows, scopes=scopes,
                        scope_macro=macro(scopes) if scopes else {})


def latency_summary(store: HistoryStore, run_id: str) -> dict[str, float | None]:
    """Per-case target latency of a run as the runner timed it: p50, p95, max (ms)."""
    with store.engine.connect() as conn:
        lat = np.array([r[0] for r in conn.execute(_LATENCY, {"run": run_id})], dtype=np.float64)
    if not lat.size:
        return {"p50_ms": None, "p95_ms": None, "max_ms": None}
    p50, p95 = np.percentile(lat, [50, 95])
    return {"p50_ms": float(p50), "p95_ms": float(p95), "max_ms": float(lat.max())}
