"""The one confirmation of a revision: the final candidate against the current prompt, paired
case by case on the test split, once.

The statistic is the mean per-case score (the mean of the suite's scorers, what the search
maximised) of the candidate minus the current prompt's. The test is evalloop's paired
permutation test, one-sided (is the candidate better?), at the level this use of the test split
has (:func:`evalloop.loop.revise_plan.alpha_for`); the interval is the BCa bootstrap interval of
the mean difference. Cases of one group (same text, same ``group:``) move together, so with
groups the signs of whole groups are flipped and whole groups resampled. The candidate is
*better* when the gain is positive, significant at that level, and no scorer is significantly
worse (one-sided, at 0.05): a revision must not buy one scorer with another.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from evalloop.learning.revisions import Confirmation
from evalloop.loop.revise_eval import CandidateCase
from evalloop.verdicts.stats import bootstrap_ci, paired_permutation_test

#: a scorer significantly worse at this level blocks writing
WORSE_ALPHA = 0.05


def confirm(current: Sequence[CandidateCase], candidate: Sequence[CandidateCase], *, alpha: float,
            groups: Mapping[str, str] | None = None, level: float = 0.95) -> Confirmation:
    """Compare ``candidate`` with ``current`` (the same cases, in the same order) at ``alpha``."""
    if [r.id for r in current] != [r.id for r in candidate]:
        raise ValueError("the confirmation compares the same cases in the same order")
    ids = [r.id for r in current]
    keys = [(groups or {}).get(c, c) for c in ids]
    clusters = keys if max(Counter(keys).values(), default=0) > 1 else None
    x = [r.score for r in candidate]
    y = [r.score for r in current]
    n = len(ids)
    test = paired_permutation_test(x, y, alternative="greater", clusters=clusters)
    diffs = [a - b for a, b in zip(x, y, strict=True)]
    ci = bootstrap_ci(diffs, level=level, clusters=clusters)
    scorers: dict[str, dict[str, float | None]] = {}
    worse = []
    for name in dict.fromkeys(s for r in current for s in r.scores):
        pairs = [(a.scores.get(name), b.scores.get(name)) for a, b in zip(candidate, current, strict=True)]
        kept = [(a, b, k) for (a, b), k in zip(pairs, keys, strict=True) if a is not None and b is not None]
        if not kept:
            scorers[name] = {"current": None, "candidate": None, "diff": None, "p_worse": None}
            continue
        xa, yb, ks = [a for a, _, _ in kept], [b for _, b, _ in kept], [k for _, _, k in kept]
        own = ks if max(Counter(ks).values()) > 1 else None
        p_worse = paired_permutation_test(xa, yb, alternative="less", clusters=own).p_value
        diff = sum(xa) / len(xa) - sum(yb) / len(yb)
        scorers[name] = {"current": sum(yb) / len(yb), "candidate": sum(xa) / len(xa), "diff": diff,
                         "p_worse": p_worse}
        if diff < 0 and p_worse < WORSE_ALPHA:
            worse.append(name)
    gain = sum(diffs) / n if n else 0.0
    return Confirmation(n=n, current=sum(y) / n if n else 0.0, candidate=sum(x) / n if n else 0.0, gain=gain,
                        low=ci.low if ci else None, high=ci.high if ci else None, level=level,
                        p_value=test.p_value, alpha=alpha,
                        test="paired permutation, one-sided" + (", by group" if clusters else ""),
                        better=gain > 0 and test.p_value < alpha and not worse, scorers=scorers, worse=worse)
