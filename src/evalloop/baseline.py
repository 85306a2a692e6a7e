"""Rolling baselines and regressions: a finished run compared with the runs before it.

The baseline of a scorer is the mean of its means over the last N (default 5) completed,
valid runs of the same suite before this run. Drop = (baseline − current) / baseline; a
regression is a drop at or above the scorer's threshold. Zero or missing baselines give no
drop (and never NaN). This module reads history; it knows nothing of memories.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

from evalloop.history.models import Run, ScorerSummary
from evalloop.history.store import HistoryStore

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
    results = [_compare_scorer(store, run, summary, window) for summary in summaries.values()]
    store.update_summaries(run.id, {
        r.scorer: {"verdict": r.verdict, "baseline": r.baseline, "drop": r.drop} for r in results
    })
    return Comparison(run, results)


def _compare_scorer(store: HistoryStore, run: Run, summary: ScorerSummary, window: int) -> ScorerComparison:
    details = json.loads(summary.details or "{}")
    pass_mark = float(details.get("pass_mark", 0.5))
    base = ScorerComparison(
        scorer=summary.scorer, kind=summary.kind, current=summary.mean, n=summary.n,
        errored=summary.errored, skipped=summary.skipped, threshold=summary.threshold,
        baseline=None, window_runs=0, drop=None, verdict="", is_regression=False,
    )
    if summary.skipped:
        base.verdict, base.reason = "skipped", details.get("skip") or "scorer did not run"
        return base
    prior = store.baseline_runs(run.suite, summary.scorer, run, window)
    base.window_runs = len(prior)
    means = [s.mean for _, s in prior if s.mean is not None and math.isfinite(s.mean)]
    base.baseline = sum(means) / len(means) if means else None
    base.drop = relative_drop(base.baseline, summary.mean)
    if prior:
        previous = prior[-1][0]
        base.previous_run = previous.id
        _flips(store, run, previous, summary.scorer, pass_mark, base)
    if not run.valid:
        base.verdict, base.reason = "invalid run", run.invalid_reason or "run is not valid"
        return base
    if details.get("controls_passed"):
        passed = details["controls_passed"]
        base.verdict = "scorer broken"
        base.reason = (f"passed {len(passed)} known-bad case(s) (expect: fail): "
                       f"{', '.join(passed[:5])}")
        return base
    if base.baseline is None:
        base.verdict, base.reason = "no baseline yet", "no completed valid run before this one"
        return base
    if base.drop is None:
        base.verdict = "steady"
        base.reason = "baseline is 0: no relative drop" if base.current is not None \
            else "no graded cases in this run"
        return base
    if base.drop >= summary.threshold - EPS:
        base.verdict, base.is_regression = "regressed", True
        base.reason = f"drop {base.drop:.1%} ≥ threshold {summary.threshold:.0%}"
    elif -base.drop >= summary.threshold - EPS:
        base.verdict, base.reason = "improved", f"rise {-base.drop:.1%}"
    else:
        base.verdict, base.reason = "steady", f"drop {base.drop:.1%} < threshold {summary.threshold:.0%}"
    return base


def _flips(store: HistoryStore, run: Run, previous: Run, scorer: str, pass_mark: float,
           out: ScorerComparison) -> None:
    now = store.case_scores(run.id, scorer)
    before = store.case_scores(previous.id, scorer)
    failing = sorted(c for c, v in now.items() if v < pass_mark and before.get(c, 0.0) >= pass_mark
                     and c in before)
    passing = sorted(c for c, v in now.items() if v >= pass_mark and c in before
                     and before[c] < pass_mark)
    messages = store.case_messages(run.id, scorer, failing[:MAX_LISTED])
    out.newly_failing = [(c, messages.get(c, "")) for c in failing]
    out.newly_passing = passing
