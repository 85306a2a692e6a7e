"""A slow drift: a run judged against its *reference* — the first good runs since the last
acceptance (or ever) — beside its rolling window, which can follow a drop down a night at a time."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from evalloop.history.eligibility import accepted
from evalloop.history.models import Run, ScorerSummary
from evalloop.history.store import HistoryStore
from evalloop.policy import VerdictPolicy
from evalloop.scoring.scorevec import Vector, align
from evalloop.verdicts.arrays import Floats
from evalloop.verdicts.drop import drop_bounds, scope_groups
from evalloop.verdicts.runlabel import run_label_permutation_test
from evalloop.verdicts.verdict import Verdict, VerdictStatus


def slow_drift(store: HistoryStore, run: Run, summary: ScorerSummary, policy: VerdictPolicy, current: Vector,
               evidence: Verdict, prior: list[tuple[Run, ScorerSummary]],
               stored: Callable[[str], Callable[[], Mapping[str, float] | Floats]],
               scopes: Mapping[str, str] | None = None) -> Verdict:
    """A slow drift: the run against its *reference* — the first ``window`` good runs since the
    last acceptance (or ever) — not only the rolling window. Each night may drop within the noise
    while the window follows it down; against the reference the same drop adds up, and the run
    regresses once it is at least the threshold with the evidence rule's confidence."""
    reference = store.reference_runs(run.suite, summary.scorer, run, len(prior) or 1,
                                     measurement=summary.measurement)
    if not reference or {r.id for r, _ in reference} <= {r.id for r, _ in prior}:
        return evidence
    aligned = align(current.ids, current.values, [stored(r.id) for r, _ in reference], scopes,
                    order=current.order)
    rows = aligned.compared
    if rows.sum() < 2:
        return evidence
    x = aligned.current[rows]
    w = aligned.window[rows]
    y = np.nanmean(w, axis=1)
    base = float(y.mean())
    # the same bound and test as the verdict's (by scope when the suite has scopes), only against the reference
    groups = scope_groups(aligned.scopes, rows)
    low, _ = drop_bounds(x - y, base, policy.confidence, groups)
    if low is None or low < policy.threshold - 1e-9:
        return evidence
    if run_label_permutation_test(x, w, permutations=policy.permutations, seed=policy.seed,
                                  clusters=groups).p_value >= policy.alpha:
        return evidence
    since = accepted(reference[0][1])
    origin = (f"accepted reference (run {reference[0][0].id}, accepted: {since.get('reason')})" if since
              else f"reference of the first good runs (from run {reference[0][0].id})")
    reason = (f"Slow drift: against the {origin} the drop is significant and at least {policy.threshold:.0%} with "
              f"{policy.confidence:.0%} confidence ({base:.3f} → {float(x.mean()):.3f}, lower bound {low:.1%}); "
              f"the rolling window followed it down: {evidence.reason}")
    return evidence.model_copy(update={"status": VerdictStatus.REGRESSED, "reason": reason})
