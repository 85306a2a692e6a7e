"""Two runs side by side: per-scorer deltas, evidence, and the cases that crossed the pass mark."""

from __future__ import annotations

from collections.abc import Callable

from pydantic import BaseModel

from evalloop.errors import EvalloopError
from evalloop.history.details import summary_details
from evalloop.history.models import Run
from evalloop.history.store import HistoryStore
from evalloop.score import passes


class ScorerDelta(BaseModel):
    """One scorer in two runs: means, their difference, and the cases that crossed the pass mark."""

    scorer: str
    mean_a: float | None
    mean_b: float | None
    delta: float | None
    relative: float | None
    pass_mark: float
    common_cases: int
    ci_a: tuple[float, float] | None = None
    ci_b: tuple[float, float] | None = None
    p_value: float | None = None
    stars: str = ""
    test: str | None = None
    newly_failing: list[str]
    newly_passing: list[str]


class RunDiff(BaseModel):
    run_a: str
    run_b: str
    suite_a: str
    suite_b: str
    scorers: list[ScorerDelta]


#: a run's scores of one scorer (controls left out) -> the bootstrap interval of their mean
Interval = Callable[[Run, str, dict[str, float]], "tuple[float, float] | None"]


def bootstrap_interval(run: Run, scorer: str, scores: dict[str, float]) -> tuple[float, float] | None:
    """The 95% bootstrap interval of the mean of one run's scores (None: fewer than two)."""
    from evalloop.verdicts import stats

    ci = stats.bootstrap_ci(list(scores.values()))
    return (ci.low, ci.high) if ci is not None else None


def diff_runs(store: HistoryStore, a: Run, b: Run, *, interval: Interval = bootstrap_interval) -> RunDiff:
    """Compare run ``b`` with run ``a`` scorer by scorer (scorers in either run); ``interval``
    gives each run's interval (the viewer keeps a run's, which depends on that run alone)."""
    sa, sb = store.summaries(a.id), store.summaries(b.id)
    deltas = []
    for name in [*sb, *(n for n in sa if n not in sb)]:
        mean_a = sa[name].mean if name in sa else None
        mean_b = sb[name].mean if name in sb else None
        details = summary_details(sb.get(name) or sa[name])
        pass_mark = details.pass_mark
        controls = set(details.controls)  # known-bad cases check the scorer, not the product
        ca = {c: v for c, v in store.case_scores(a.id, name).items() if c not in controls}
        cb = {c: v for c, v in store.case_scores(b.id, name).items() if c not in controls}
        common = ca.keys() & cb.keys()
        delta = None if mean_a is None or mean_b is None else mean_b - mean_a
        deltas.append(ScorerDelta(
            scorer=name, mean_a=mean_a, mean_b=mean_b, delta=delta,
            relative=delta / mean_a if delta is not None and mean_a else None,
            pass_mark=pass_mark, common_cases=len(common), ci_a=interval(a, name, ca), ci_b=interval(b, name, cb),
            **_evidence(ca, cb, sorted(common)),
            newly_failing=sorted(c for c in common if passes(ca[c], pass_mark) and not passes(cb[c], pass_mark)),
            newly_passing=sorted(c for c in common if passes(cb[c], pass_mark) and not passes(ca[c], pass_mark))))
    return RunDiff(run_a=a.id, run_b=b.id, suite_a=a.suite, suite_b=b.suite, scorers=deltas)


def _evidence(ca: dict[str, float], cb: dict[str, float], common: list[str]) -> dict:
    """A two-sided paired test on the cases both runs graded."""
    from evalloop.verdicts import stats

    out: dict = {}
    if len(common) >= 2:
        x, y = [cb[c] for c in common], [ca[c] for c in common]
        binary = all(v in (0.0, 1.0) for v in (*x, *y))
        result = stats.mcnemar_exact(x, y) if binary else stats.paired_permutation_test(x, y)
        out.update(p_value=result.p_value, stars=stats.stars(result.p_value), test=result.test)
    return out


def find_run(store: HistoryStore, ref: str, where: str) -> Run:
    """A run by id or unique prefix, or ``last`` for the newest; an unknown or ambiguous one is a
    one-line error."""
    if ref == "last":
        newest = store.runs(None, limit=1)
        if not newest:
            raise EvalloopError("no runs yet", where=where, hint="run `evalloop run --suite NAME` first")
        return newest[0]
    found = store.find_runs(ref, limit=4)
    if len(found) == 1:
        return found[0]
    if not found:
        raise EvalloopError(f"no run '{ref}'", where=where,
                            hint="use a run id or a unique prefix (see `evalloop history`)")
    shown = ", ".join(r.id for r in found[:3]) + (", …" if len(found) > 3 else "")
    raise EvalloopError(f"run prefix '{ref}' is ambiguous: it matches {shown}", where=where,
                        hint="give more of the run id (see `evalloop history`)")
