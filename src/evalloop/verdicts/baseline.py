"""Rolling baselines: a finished run compared with the runs before it, and the verdicts stored.

The baseline of a scorer is its mean over the last N (default 5) eligible runs of the same
suite before this run (one definition of eligibility: :mod:`evalloop.history.eligibility`).
The verdict itself comes from :mod:`evalloop.verdicts.verdict`, with the policy the run recorded for
each scorer; the run's own per-case scores come from the runner's :class:`ScorerResult` (or
history, for a stored run). The window of a scorer holds only runs measured as this run's
scorer is (a changed judge is bridged or restarts the window), and the comparison says what
changed since it, the product or a measurement (:mod:`evalloop.verdicts.identity`). This module
reads history; it knows nothing of memories.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from evalloop.history.details import SummaryDetails, summary_details
from evalloop.history.eligibility import RULE as ELIGIBILITY_RULE
from evalloop.history.eligibility import RULE_KEY as ELIGIBILITY_RULE_KEY
from evalloop.history.eligibility import eligible_now
from evalloop.history.models import Run, ScorerSummary
from evalloop.history.store import HistoryStore
from evalloop.history.window import KEY as WINDOW_KEY
from evalloop.policy import VerdictPolicy
from evalloop.scoring.scorevec import Vector, align, from_mapping
from evalloop.verdicts import identity, sequential, soundness
from evalloop.verdicts.arrays import Floats
from evalloop.verdicts.drift import slow_drift
from evalloop.verdicts.identity import FingerprintChange, Windows
from evalloop.verdicts.nightly import judge_night
from evalloop.verdicts.power import z_quantile
from evalloop.verdicts.verdict import Verdict, VerdictStatus, decide_aligned

EPS = 1e-9
MAX_LISTED = 20
_DRIFT_CHECKED = frozenset({VerdictStatus.STEADY, VerdictStatus.WATCH, VerdictStatus.IMPROVED,
                            VerdictStatus.BELOW_FLOOR})


@dataclass
class ScorerComparison:
    """One scorer of one run against its rolling baseline: what every output reads."""

    scorer: str
    kind: str
    current: float | None  # mean over this run's cases (controls and quarantined cases left out)
    n: int  # cases graded
    errored: int  # grades that errored
    skipped: bool
    threshold: float
    baseline: float | None
    window_runs: int
    drop: float | None
    status: VerdictStatus
    reason: str = ""
    newly_failing: list[tuple[str, str]] = field(default_factory=list)
    newly_passing: list[str] = field(default_factory=list)
    previous_run: str | None = None
    evidence: Verdict | None = None
    first_error: str = ""
    grades: int = 0
    pass_mark: float = 0.5  # a case scoring below it fails (the suite's, else the scorer's)
    chart: sequential.Chart | None = None  # the nightly rule's state after this run
    window: list[str] = field(default_factory=list)  # the baseline's runs (ids, oldest first), as stored

    @property
    def verdict(self) -> str:
        return self.status.value

    @property
    def is_regression(self) -> bool:
        return self.status.is_regression

    @property
    def fails(self) -> bool:
        """Regressed, scorer broken or invalid: exit 1, JUnit failure, webhook."""
        return self.status.fails

    @property
    def mdd(self) -> float | None:
        return self.evidence.mdd if self.evidence else None

    @property
    def p_value(self) -> float | None:
        return self.evidence.p_value if self.evidence else None


@dataclass
class FailureRate:
    """How often the target failed its cases (raised, timed out, unparseable output) in this run,
    beside the same rate over the baseline's runs. Each failure is already a real 0 in every
    scorer; the rate says how much of a drop is the target breaking rather than answering worse."""

    failures: int
    results: int  # case results (cases × epochs)
    baseline_failures: int
    baseline_results: int

    @property
    def rate(self) -> float:
        return self.failures / self.results if self.results else 0.0

    @property
    def baseline_rate(self) -> float | None:
        return self.baseline_failures / self.baseline_results if self.baseline_results else None

    def describe(self) -> str:
        base = "" if self.baseline_rate is None else f" (baseline {self.baseline_rate:.1%})"
        return f"target failures: {self.failures}/{self.results} = {self.rate:.1%}{base}"


@dataclass
class Comparison:
    """Every scorer of one run against its baseline."""

    run: Run
    scorers: list[ScorerComparison]
    fingerprint_change: FingerprintChange | None = None
    target_failures: FailureRate | None = None

    @property
    def regressions(self) -> list[ScorerComparison]:
        return [s for s in self.scorers if s.is_regression]

    @property
    def has_regression(self) -> bool:
        return any(s.is_regression for s in self.scorers)

    @property
    def broken(self) -> list[ScorerComparison]:
        """Scorers that passed a known-bad case (a negative control): their grades are suspect."""
        return [s for s in self.scorers if s.status is VerdictStatus.SCORER_BROKEN]

    @property
    def watches(self) -> list[ScorerComparison]:
        return [s for s in self.scorers if s.status is VerdictStatus.WATCH]

    @property
    def below_floor(self) -> list[ScorerComparison]:
        return [s for s in self.scorers if s.status is VerdictStatus.BELOW_FLOOR]

    @property
    def invalid(self) -> bool:
        return not self.run.valid or any(s.status is VerdictStatus.INVALID for s in self.scorers)

    @property
    def fails(self) -> bool:
        """Whether this run fails CI (one rule: :func:`evalloop.verdicts.outcome.run_outcome`)."""
        from evalloop.verdicts.outcome import run_outcome

        return run_outcome(self).fails

    @property
    def worst(self) -> VerdictStatus | None:
        """The one status that sums the run up (one order: :func:`evalloop.verdicts.outcome.run_outcome`)."""
        from evalloop.verdicts.outcome import run_outcome

        return run_outcome(self).status


def relative_drop(baseline: float | None, current: float | None) -> float | None:
    """(baseline − current) / baseline, or None when either is missing, zero or not finite."""
    if baseline is None or current is None:
        return None
    if not (math.isfinite(baseline) and math.isfinite(current)) or abs(baseline) < EPS:
        return None
    return (baseline - current) / baseline


def compare_run(store: HistoryStore, run: Run, *, window: int = 5,
                current: Mapping[str, Mapping[str, float] | Vector] | None = None,
                nightly: bool = False, scopes: Mapping[str, str] | None = None,
                windows: Windows | None = None) -> Comparison:
    """Compare every scorer of ``run`` with its rolling baseline, and store the verdicts.

    ``current`` (scorer → case → epoch-averaged score, or the runner's score :class:`Vector`)
    is the runner's result; without it the run's scores are read from history. A baseline run
    with a stored vector for the same case list is read as that vector, not row by row.
    ``nightly`` judges the run as one night of a series (:mod:`evalloop.verdicts.sequential`).
    ``scopes`` (case id → scope) are read from the run's stored tags unless the caller knows
    them (``{}``: no case of the run has a tag). ``windows``: the baseline reads of
    :func:`baseline_windows`, when the caller made them (to bridge a measurement change first).
    """
    summaries = store.summaries(run.id)
    windows = windows or baseline_windows(store, run, window, summaries)
    change = identity.settle(windows)
    graded = sum(1 for s in summaries.values() if not s.skipped)
    if scopes is None:  # a scoped suite's verdicts count conversations, not questions
        scopes = store.case_scopes(run.id)
    results = [compare_scorer(store, run, summary, window,
                              current=None if current is None else current.get(summary.scorer),
                              nightly=nightly, scorers=graded, scopes=scopes,
                              prior=None if summary.skipped else windows.measured(summary.scorer),
                              product=windows.restart_at)
               for summary in summaries.values()]
    first = next((s.scorer for s in summaries.values() if not s.skipped), None)
    target = _failure_rate(run, None if first is None else windows.product.get(first, []))
    store.update_summaries(run.id, {
        r.scorer: {"verdict": r.verdict, "baseline": r.baseline, "drop": r.drop, "mean": r.current,
                   "n": r.n, "p_value": r.p_value, "mdd": r.mdd,
                   "eligible": eligible_now(run, summaries[r.scorer], r.verdict,
                                            kept_out=r.evidence is not None and r.evidence.keeps_out),
                   "details": _with_evidence(summaries[r.scorer].details, r.evidence, change, r.chart, r.window)}
        for r in results
    })
    return Comparison(run, results, change, target)


def baseline_windows(store: HistoryStore, run: Run, window: int,
                     summaries: Mapping[str, ScorerSummary] | None = None) -> Windows:
    """The baseline reads of ``run`` and what changed since its baseline (:mod:`evalloop.verdicts.identity`):
    a product change restarts the window when a scorer's policy says ``restart_on_change``."""
    summaries = store.summaries(run.id) if summaries is None else summaries
    restart = any(_policy(s).restart_on_change for s in summaries.values() if not s.skipped)
    return identity.read(store, run, summaries, window, restart)


def _failure_rate(run: Run, prior: list[tuple[Run, ScorerSummary]] | None) -> FailureRate | None:
    """The run's target-failure rate beside its baseline runs' (``prior``: the first graded
    scorer's; None when no scorer was graded; runs of older versions count 0)."""
    if run.target_failures is None or prior is None:
        return None
    results = lambda r: (r.n_cases or 0) * (r.epochs or 1)  # noqa: E731
    return FailureRate(run.target_failures, results(run),
                       sum(r.target_failures or 0 for r, _ in prior if r.target_failures is not None),
                       sum(results(r) for r, _ in prior if r.target_failures is not None))


def _policy(summary: ScorerSummary, details: SummaryDetails | None = None) -> VerdictPolicy:
    """The policy this scorer's run recorded (``details``: its details, when already read)."""
    details = summary_details(summary) if details is None else details
    return VerdictPolicy.model_validate({"threshold": summary.threshold, "pass_mark": details.pass_mark,
                                         **{k: v for k, v in details.policy.items()
                                            if k in VerdictPolicy.model_fields}})


def _with_evidence(details: Mapping[str, object], evidence: Verdict | None, change: FingerprintChange | None,
                   chart: sequential.Chart | None = None, window: list[str] | None = None) -> dict[str, object]:
    data = dict(details)
    data[WINDOW_KEY] = window or []  # what every report's band reads (evalloop.history.window)
    data[ELIGIBILITY_RULE_KEY] = ELIGIBILITY_RULE  # the rule "eligible" is judged by (history.eligibility)
    if chart is not None:
        data["chart"] = chart.model_dump()
    if evidence is not None:
        data["evidence"] = evidence.model_dump(
            mode="json", include={"stars", "test", "ci_low", "ci_high", "effect_size", "n_paired",
                                  "n_unpaired", "flaky", "quarantined", "rule", "reason", "added",
                                  "added_mean", "removed", "removed_mean", "shared_mean",
                                  "drop_ci_low", "drop_ci_high", "window_runs", "z", "mode",
                                  "min_score", "ci_method", "scopes", "floor_state", "floor_w",
                                  "keeps_out", "set_aside"})
    if change is not None:
        data["fingerprint_change"] = {"previous_run": change.previous_run, "changed": change.changed,
                                      "restarted": change.restarted, "product": change.product,
                                      "measurement": change.measurement, "bridged": change.bridged}
    return data


def compare_scorer(store: HistoryStore, run: Run, summary: ScorerSummary, window: int, *,
                   current: Mapping[str, float] | Vector | None = None, nightly: bool = False,
                   scorers: int = 1, scopes: Mapping[str, str] | None = None,
                   prior: list[tuple[Run, ScorerSummary]] | None = None,
                   product: str | None = None) -> ScorerComparison:
    """One scorer of one run against the last ``window`` eligible runs before it (``prior``, when
    the caller has read them); ``scopes`` (case id → ``scope:<id>``) makes its statistics count
    whole scopes; ``product``: the product the window restarted at (``restart_on_change``), for the
    sound baseline a drop is judged against."""
    details = summary_details(summary)
    policy = _policy(summary, details)
    out = ScorerComparison(
        scorer=summary.scorer, kind=summary.kind, current=summary.mean, n=summary.n,
        errored=summary.errored, skipped=summary.skipped, threshold=summary.threshold,
        baseline=None, window_runs=0, drop=None, status=VerdictStatus.SKIPPED,
        first_error=details.first_error or "", grades=details.grades or 0,
        pass_mark=policy.pass_mark,
    )
    if summary.skipped:
        out.reason = details.skip or "scorer did not run"
        return out
    if prior is None:
        prior = store.baseline_runs(run.suite, summary.scorer, run, window, measurement=summary.measurement)
    if not isinstance(current, Vector):
        current = Vector(*from_mapping(current if current is not None
                                       else store.case_scores(run.id, summary.scorer)))
    controls = set(details.controls)
    ids = current.ids

    def stored(run_id: str) -> Callable[[], Mapping[str, float] | Floats]:
        def load() -> Mapping[str, float] | Floats:
            data = store.score_vector(run_id, summary.scorer, current.digest)
            return Vector.decode(data) if data is not None and len(data) == 8 * len(ids) \
                else store.case_scores(run_id, summary.scorer)
        return load

    # a run of the same case list lines up by position: no per-case rows read, and each run's
    # vector is read only when its column is filled (one at a time at 100,000 cases)
    # validity is judged per scorer: one scorer's errored grades do not hide another's regression
    # (the run as a whole still stays out of baselines)
    aligned = align(current.ids, current.values, [stored(r.id) for r, _ in prior], scopes, order=current.order)
    last_good = prior[-1] if prior else None
    aligned, prior, aside = soundness.set_aside(aligned, prior)
    evidence = decide_aligned(aligned, policy,
                              binary=details.binary, known_bad=controls,
                              scorer_controls=details.scorer_controls,
                              valid=not details.invalid, invalid_reason=details.invalid,
                              scorers=scorers)
    if aside:
        said = f"{evidence.reason} {soundness.aside_sentence(aside)}"
        evidence = evidence.model_copy(update={"set_aside": aside, "reason": said})
    if evidence.z is not None and evidence.status in _DRIFT_CHECKED:
        evidence = slow_drift(store, run, summary, policy, current, evidence, prior, stored, scopes)
    found: list[float | None] = []

    def sound() -> float | None:
        """The drop against a sound baseline (read once, and only when a drop needs it)."""
        if not found:
            found.append(soundness.sound_drop(store, run, summary, current, stored, scopes, window, product,
                                              last_good))
        return found[0]

    shown = evidence.status is VerdictStatus.REGRESSED  # the single-run rule: at least the threshold, shown
    if nightly and evidence.z is not None:
        evidence, out.chart = judge_night(store, run, summary, policy, evidence, scorers, sound)
    if evidence.significant_drop or evidence.status is VerdictStatus.REGRESSED:
        # the drop keeps the run out of later baselines only if it holds against a sound one
        # (a red night already does: the chart asked); with no sound baseline yet (a young suite)
        # only a drop the single-run rule shows to be at least the threshold is trusted: a night
        # red against one lucky first run keeps nothing out
        red = out.chart is not None and out.chart.red
        against = sound()
        significant = z_quantile(1.0 - policy.alpha / 2)
        keeps = shown if against is None else red or against >= significant
        evidence = evidence.model_copy(update={"keeps_out": keeps})
    out.evidence = evidence
    if evidence.current_mean is not None:  # without controls and quarantined cases, as judged
        out.current = evidence.current_mean
        out.n = evidence.n_current
    out.window_runs = evidence.window_runs
    out.baseline, out.drop = evidence.baseline_mean, evidence.drop
    out.status, out.reason = evidence.status, evidence.reason
    if prior:
        out.previous_run = prior[-1][0].id
        out.window = [r.id for r, _ in prior]
    messages = store.case_messages(run.id, summary.scorer, evidence.newly_failing[:MAX_LISTED])
    out.newly_failing = [(c, messages.get(c, "")) for c in evidence.newly_failing]
    out.newly_passing = list(evidence.newly_passing)
    return out
