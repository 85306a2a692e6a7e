"""Rolling baselines and verdicts: a finished run compared with the runs before it.

The baseline of a scorer is its mean over the last N (default 5) completed, valid runs of the
same suite before this run; drop = (baseline − current) / baseline. The verdict itself — the
ADR threshold rule with significance beside it, or evalloop's paired rule — comes from
:mod:`evalloop.verdict`, with the policy the run recorded for each scorer. This module reads
history; it knows nothing of memories.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

from evalloop.history.models import Run, ScorerSummary
from evalloop.history.store import HistoryStore, dumps
from evalloop.verdict import Verdict, VerdictPolicy, decide

EPS = 1e-9
MAX_LISTED = 20


@dataclass
class ScorerComparison:
    """One scorer of one run, against its rolling baseline."""

    scorer: str
    kind: str
    current: float | None
    n: int
    errored: int
    skipped: bool
    threshold: float
    baseline: float | None
    window_runs: int
    drop: float | None
    verdict: str
    is_regression: bool
    reason: str = ""
    newly_failing: list[tuple[str, str]] = field(default_factory=list)
    newly_passing: list[str] = field(default_factory=list)
    previous_run: str | None = None
    evidence: Verdict | None = None
    first_error: str = ""


@dataclass
class Comparison:
    """Every scorer of one run against its baseline."""

    run: Run
    scorers: list[ScorerComparison]

    @property
    def regressions(self) -> list[ScorerComparison]:
        return [s for s in self.scorers if s.is_regression]

    @property
    def has_regression(self) -> bool:
        return any(s.is_regression for s in self.scorers)

    @property
    def broken(self) -> list[ScorerComparison]:
        """Scorers that passed a known-bad case (a negative control): their grades are suspect."""
        return [s for s in self.scorers if s.verdict == "scorer broken"]


def relative_drop(baseline: float | None, current: float | None) -> float | None:
    """(baseline − current) / baseline, or None when either is missing, zero or not finite."""
    if baseline is None or current is None:
        return None
    if not (math.isfinite(baseline) and math.isfinite(current)) or abs(baseline) < EPS:
        return None
    return (baseline - current) / baseline


def compare_run(store: HistoryStore, run: Run, *, window: int = 5) -> Comparison:
    """Compare every scorer of ``run`` with its rolling baseline, and store the verdicts."""
    summaries = store.summaries(run.id)
    results = [compare_scorer(store, run, summary, window) for summary in summaries.values()]
    store.update_summaries(run.id, {
        r.scorer: {"verdict": r.verdict, "baseline": r.baseline, "drop": r.drop,
                   "details": _with_evidence(summaries[r.scorer].details, r.evidence)}
        for r in results
    })
    return Comparison(run, results)


def _with_evidence(details: str, evidence: Verdict | None) -> str:
    data = json.loads(details or "{}")
    if evidence is not None:
        data["evidence"] = evidence.model_dump(
            mode="json", include={"p_value", "stars", "test", "ci_low", "ci_high", "effect_size",
                                  "n_paired", "n_unpaired", "flaky", "quarantined", "rule",
                                  "paired_drop", "reason"})
    return dumps(data)


def compare_scorer(store: HistoryStore, run: Run, summary: ScorerSummary, window: int) -> ScorerComparison:
    """One scorer of one run against the last ``window`` valid runs before it."""
    details = json.loads(summary.details or "{}")
    policy = VerdictPolicy(**{"threshold": summary.threshold,
                              "pass_mark": details.get("pass_mark", 0.5), **details.get("policy", {})})
    out = ScorerComparison(
        scorer=summary.scorer, kind=summary.kind, current=summary.mean, n=summary.n,
        errored=summary.errored, skipped=summary.skipped, threshold=summary.threshold,
        baseline=None, window_runs=0, drop=None, verdict="", is_regression=False,
        first_error=details.get("first_error") or "",
    )
    if summary.skipped:
        out.verdict, out.reason = "skipped", details.get("skip") or "scorer did not run"
        return out
    prior = store.baseline_runs(run.suite, summary.scorer, run, window)
    current = store.case_scores(run.id, summary.scorer)
    windows = [store.case_scores(r.id, summary.scorer) for r, _ in prior]
    # validity is judged per scorer: one scorer's errored grades do not hide another's regression
    # (the run as a whole still stays out of baselines)
    evidence = decide(current, windows, policy, binary=details.get("binary"),
                      known_bad=details.get("controls", []), valid=not details.get("invalid"))
    if evidence.status == "invalid run" and details.get("invalid"):
        evidence.reason = details["invalid"]
    out.evidence = evidence
    if evidence.current_mean is not None:  # without controls and quarantined cases, as judged
        out.current = evidence.current_mean
    out.window_runs = evidence.window_runs
    out.baseline, out.drop = evidence.baseline_mean, evidence.drop
    out.verdict, out.is_regression, out.reason = evidence.status.value, evidence.is_regression, evidence.reason
    if prior:
        out.previous_run = prior[-1][0].id
    messages = store.case_messages(run.id, summary.scorer, evidence.newly_failing[:MAX_LISTED])
    out.newly_failing = [(c, messages.get(c, "")) for c in evidence.newly_failing]
    out.newly_passing = list(evidence.newly_passing)
    return out
