"""Trend data for reports: per suite and scorer, the last N runs with band, threshold and flips.

Both the HTML and the Markdown report render a :class:`TrendReport`; nothing here knows how it
is drawn. The band around each point is the range (min..max) of the scorer's means over the runs
its verdict was judged against — the window the verdict stored (:mod:`evalloop.history.window`),
after an acceptance or a restarted baseline too; nothing here rebuilds a window of its own.
The threshold line is ``baseline × (1 − threshold)``: a mean below it is a regression.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, computed_field

from evalloop.errors import EvalloopError
from evalloop.history import identity
from evalloop.history.details import summary_details
from evalloop.history.eligibility import baseline_eligible, verdict_reason
from evalloop.history.models import Run, RunStatus, ScorerSummary
from evalloop.history.store import HistoryStore
from evalloop.history.strata import StrataReport, strata_means
from evalloop.history.window import verdict_window
from evalloop.redact import redact_url
from evalloop.report.failing import CaseReader, FailingCase, FlippedCase
from evalloop.verdicts.outcome import RunOutcome, outcome_of_labels
from evalloop.verdicts.verdict import VerdictStatus

DEFAULT_LAST = 20
MAX_MEMORIES = 50


class TrendPoint(BaseModel):
    """One scorer in one run: its mean, the rolling window before it, and what flipped."""

    run_id: str
    started_at: datetime
    mean: float | None
    n: int
    errored: int
    skipped: bool
    verdict: str | None
    drop: float | None
    baseline: float | None
    mdd: float | None = None  # the relative drop this run's verdict would catch 90 % of the time
    band_low: float | None = None
    band_high: float | None = None
    window_runs: int = 0
    threshold_line: float | None = None
    eligible: bool = True
    reason: str = ""  # the verdict's words: what the rule showed (as `run`, `show` and the sinks say)
    previous_run: str | None = None
    newly_failing: list[FlippedCase] = Field(default_factory=list)
    newly_passing: list[FlippedCase] = Field(default_factory=list)
    # since the scorer's run before this one: what of the product changed (target_params.prompt, ...)
    # and what of the scorer's measurement (model, params.rubric, code): the chart marks each apart
    product_changed: list[str] = Field(default_factory=list)
    measurement_changed: list[str] = Field(default_factory=list)
    floor: float | None = None  # the absolute floor (min_score) the verdict held the mean to
    accepted: str | None = None  # the reason, when a person accepted this run as the new normal

    @property
    def status(self) -> VerdictStatus | None:
        """The stored verdict, in the one vocabulary (older runs' labels mapped)."""
        return VerdictStatus.parse(self.verdict)

    # mypy cannot type a decorator over @property (prop-decorator): pydantic documents this ignore
    @computed_field  # type: ignore[prop-decorator]
    @property
    def regression(self) -> bool:
        """A regression: a significant drop the rule in force acts on (never a watch)."""
        return self.status is VerdictStatus.REGRESSED

    # mypy cannot type a decorator over @property (prop-decorator): pydantic documents this ignore
    @computed_field  # type: ignore[prop-decorator]
    @property
    def fails(self) -> bool:
        """Whether this verdict fails CI (regressed, scorer broken, invalid run): as ``run``."""
        return self.status is not None and self.status.fails

    @property
    def significant(self) -> bool:
        return self.regression


class ScorerTrend(BaseModel):
    """One scorer of one suite over the last N runs, oldest first."""

    scorer: str
    kind: str
    threshold: float
    pass_mark: float
    points: list[TrendPoint]
    failing: list[FailingCase] = Field(default_factory=list)  # in the latest run, longest failing first

    @property
    def latest(self) -> TrendPoint | None:
        return self.points[-1] if self.points else None

    @property
    def still_failing(self) -> list[FailingCase]:
        """The cases that keep failing: in the latest run and in the run before it too (the
        newly failing ones are the latest point's flips)."""
        return [c for c in self.failing if c.runs > 1]

    @property
    def regressions(self) -> list[TrendPoint]:
        return [p for p in self.points if p.regression]


class RunRow(BaseModel):
    """What a run cost and how fast the target answered."""

    run_id: str
    started_at: datetime
    status: str
    valid: bool
    invalid_reason: str | None
    code_version: str | None
    n_cases: int
    epochs: int
    case_errors: int
    cost_usd: float
    input_tokens: int
    output_tokens: int
    llm_calls: int
    cache_hits: int
    latency_mean_ms: float | None
    latency_p50_ms: float | None
    latency_p95_ms: float | None


class MemoryNote(BaseModel):
    """A failure memory stored for the suite."""

    id: str
    information: str
    tags: list[str]
    scorer: str | None = None
    run_id: str | None = None
    created_at: datetime | None = None
    status: str = "open"  # open, held, promoted, resolved, accepted (learning.incident_machine.State; else its tag)
    chronic_cases: list[str] = Field(default_factory=list)  # failing before the regression too: kept apart

    @property
    def state(self) -> str:
        """``open``, or ``open; chronic (failing before it too): c19``."""
        if not self.chronic_cases:
            return self.status
        return f"{self.status}; chronic (failing before it too): {', '.join(self.chronic_cases[:8])}"


class SuiteTrend(BaseModel):
    """One suite: its runs (oldest first), every scorer's trend, and its failure memories."""

    suite: str
    runs: list[RunRow]
    scorers: list[ScorerTrend]
    memories: list[MemoryNote] = Field(default_factory=list)
    memory_note: str = ""
    strata: StrataReport | None = None  # the latest run's per-tag and per-scope means, if tagged
    in_progress: int = 0  # runs of the suite still running: never shown or judged until they end

    @property
    def progress_note(self) -> str:
        """``first run in progress`` for a suite with no finished run yet; ``1 run in progress``
        beside finished ones; empty when nothing runs. Every report format says it the same."""
        if not self.in_progress:
            return ""
        if not self.runs:
            return "first run in progress"
        return f"{self.in_progress} run{'s' if self.in_progress != 1 else ''} in progress"

    @property
    def outcome(self) -> RunOutcome:
        """What the latest run sums up to, by the one rule (:mod:`evalloop.verdicts.outcome`): the
        worst of its scorers' verdicts, ``invalid run`` for a run judged invalid."""
        if not self.runs:
            return RunOutcome(None)
        latest = self.runs[-1]
        labels = [t.latest.verdict for t in self.scorers if t.latest is not None and t.latest.run_id == latest.run_id]
        return outcome_of_labels(labels, valid=latest.valid or latest.status != RunStatus.COMPLETED)

    @property
    def latest_regressions(self) -> list[ScorerTrend]:
        return [s for s in self.scorers if s.latest is not None and s.latest.regression]

    @property
    def latest_failures(self) -> list[ScorerTrend]:
        """Scorers whose latest verdict fails CI (regressed, scorer broken, invalid run)."""
        return [s for s in self.scorers if s.latest is not None and s.latest.fails]

    @property
    def latest_watches(self) -> list[ScorerTrend]:
        """Scorers whose latest verdict is ``watch``: a drop without the evidence to act on."""
        return [s for s in self.scorers if s.latest is not None and s.latest.status == VerdictStatus.WATCH]

    @property
    def total_cost(self) -> float:
        return sum(r.cost_usd for r in self.runs)


class TrendReport(BaseModel):
    """Everything a report shows, for one or more suites."""

    generated_at: datetime
    database: str
    last: int
    window: int
    suites: list[SuiteTrend]

    @property
    def regressed_suites(self) -> list[SuiteTrend]:
        return [s for s in self.suites if s.latest_regressions]

    @property
    def watches(self) -> list[tuple[SuiteTrend, ScorerTrend]]:
        return [(s, t) for s in self.suites for t in s.latest_watches]

    @property
    def failing_suites(self) -> list[SuiteTrend]:
        """Suites whose latest run fails CI — the same test as ``evalloop run``'s exit code."""
        return [s for s in self.suites if s.outcome.fails]


def build_trends(store: HistoryStore, suites: Sequence[str] | None = None, *, last: int = DEFAULT_LAST,
                 window: int = 5, memory_file: Path | None = None) -> TrendReport:
    """Trend data for ``suites`` (default: every suite in the history) over the last ``last`` runs.

    Raises :class:`EvalloopError` when the history is empty or a suite has no runs.
    """
    known = store.suites()
    names = list(suites) if suites else known
    if not names:
        raise EvalloopError("no runs in the history yet", where=store.url,
                            hint="run a suite first: evalloop run --suite NAME")
    for name in names:
        if name not in known:
            raise EvalloopError(f"no runs of suite '{name}'", where=store.url,
                                hint=f"suites with runs: {', '.join(known) or 'none'}")
    return TrendReport(
        generated_at=datetime.now(UTC), database=redact_url(store.url), last=last, window=window,
        suites=[suite_trend(store, name, last=last, window=window, memory_file=memory_file)
                for name in names],
    )


def suite_trend(store: HistoryStore, suite: str, *, last: int = DEFAULT_LAST, window: int = 5,
                memory_file: Path | None = None) -> SuiteTrend:
    """One suite's trend: the last ``last`` finished runs, each with the window its verdict used
    (``window``: the length for runs judged before verdicts recorded their window)."""
    done = [s.value for s in RunStatus if s is not RunStatus.RUNNING]
    shown = store.runs(suite, limit=last, statuses=done)[::-1]  # oldest first
    summaries = {r.id: store.summaries(r.id) for r in shown}
    reader = CaseReader(store)
    scorers = _scorer_names(shown, summaries)
    trends = [_scorer_trend(store, name, shown, summaries, reader, window) for name in scorers]
    memories, note = read_memories(memory_file, suite)
    strata = None
    if shown and shown[-1].status == RunStatus.COMPLETED:
        strata = strata_means(store, shown[-1].id, order=scorers)
        if not strata.strata and not strata.scopes:
            strata = None
    running = len(store.runs(suite, statuses=[RunStatus.RUNNING.value]))
    return SuiteTrend(suite=suite, runs=[_run_row(r, reader) for r in shown], scorers=trends,
                      memories=memories, memory_note=note, strata=strata, in_progress=running)


def _scorer_names(runs: Sequence[Run], summaries: dict[str, dict[str, ScorerSummary]]) -> list[str]:
    seen: dict[str, None] = {}
    for run in runs:
        for name in sorted(summaries[run.id]):
            seen.setdefault(name, None)
    return list(seen)


def _scorer_trend(store: HistoryStore, name: str, shown: list[Run],
                  summaries: dict[str, dict[str, ScorerSummary]], reader: CaseReader,
                  window: int) -> ScorerTrend:
    points: list[TrendPoint] = []
    latest: ScorerSummary | None = None
    before: tuple[Run, ScorerSummary] | None = None  # the scorer's run before, for what changed since
    for run in shown:
        summary = summaries[run.id].get(name)
        if summary is not None:
            latest = summary
            points.append(_point(run, summary, verdict_window(store, run, summary, window), reader))
            points[-1].product_changed, points[-1].measurement_changed = _changes(before, run, summary)
            before = (run, summary)
    assert latest is not None
    details = summary_details(latest)
    failing = reader.failing([p.run_id for p in points if not p.skipped], name, details.pass_mark, details.controls)
    return ScorerTrend(scorer=name, kind=latest.kind, threshold=latest.threshold,
                       pass_mark=details.pass_mark, points=points, failing=failing)


def _changes(before: tuple[Run, ScorerSummary] | None, run: Run, summary: ScorerSummary) -> tuple[list[str], list[str]]:
    """What of the product and of the scorer's measurement changed since the scorer's run before
    (:mod:`evalloop.history.identity`; unknown on either side: nothing)."""
    if before is None:
        return [], []
    prev, prev_summary = before
    product: list[str] = []
    measurement: list[str] = []
    if prev.product_fingerprint and run.product_fingerprint and prev.product_fingerprint != run.product_fingerprint:
        product = identity.product_changes(identity.parse(prev.fingerprint), identity.parse(run.fingerprint)) \
            or ["target"]
    if prev_summary.measurement and summary.measurement and prev_summary.measurement != summary.measurement:
        measurement = identity.measurement_changes(identity.parse(prev.fingerprint), identity.parse(run.fingerprint),
                                                   summary.scorer) or ["code"]
    return product, measurement


def _point(run: Run, summary: ScorerSummary, window: list[tuple[Run, ScorerSummary]],
           reader: CaseReader) -> TrendPoint:
    means = [s.mean for _, s in window if s.mean is not None]
    baseline = summary.baseline if summary.baseline is not None else (
        sum(means) / len(means) if means else None)
    point = TrendPoint(
        run_id=run.id, started_at=_aware(run.started_at), mean=summary.mean, n=summary.n,
        errored=summary.errored, skipped=summary.skipped, verdict=summary.verdict, drop=summary.drop,
        mdd=summary.mdd,
        baseline=baseline, band_low=min(means) if means else None,
        band_high=max(means) if means else None, window_runs=len(means),
        threshold_line=baseline * (1 - summary.threshold) if baseline is not None else None,
        eligible=baseline_eligible(run, summary), reason=verdict_reason(summary),
        **_policy_marks(summary),
    )
    if window and not summary.skipped:
        previous = window[-1][0]
        point.previous_run = previous.id
        point.newly_failing, point.newly_passing = reader.flips(run.id, previous.id, summary.scorer,
                                                                summary_details(summary).pass_mark)
    return point


def _policy_marks(summary: ScorerSummary) -> dict[str, Any]:
    """The floor the verdict held the mean to, and the acceptance, from the summary's details."""
    details = summary_details(summary)
    floor = details.policy.get("min_score")
    accepted = details.accepted
    return {"floor": float(floor) if isinstance(floor, int | float) and floor > 0 else None,
            "accepted": (accepted.reason or "accepted") if accepted is not None else None}


def _aware(at: datetime) -> datetime:
    return at if at.tzinfo else at.replace(tzinfo=UTC)


def _run_row(run: Run, reader: CaseReader) -> RunRow:
    latencies = reader.latencies(run.id)
    return RunRow(
        run_id=run.id, started_at=_aware(run.started_at), status=run.status, valid=run.valid,
        invalid_reason=run.invalid_reason, code_version=run.code_version, n_cases=run.n_cases,
        epochs=run.epochs, case_errors=run.case_errors, cost_usd=run.cost_usd,
        input_tokens=run.input_tokens, output_tokens=run.output_tokens, llm_calls=run.llm_calls,
        cache_hits=run.cache_hits,
        latency_mean_ms=sum(latencies) / len(latencies) if latencies else None,
        latency_p50_ms=_quantile(latencies, 0.5), latency_p95_ms=_quantile(latencies, 0.95),
    )


def _quantile(ordered: Sequence[float], q: float) -> float | None:
    """Linear-interpolated quantile of sorted values (NumPy's default method)."""
    if not ordered:
        return None
    pos = (len(ordered) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def read_memories(memory_file: Path | None, suite: str,
                  limit: int = MAX_MEMORIES) -> tuple[list[MemoryNote], str]:
    """The suite's failure memories (open and resolved, newest first), and a note when none can be read."""
    if memory_file is None or not Path(memory_file).is_file():
        return [], "no memory store"
    try:
        from evalloop.memory import MemoryStore
    except ImportError:
        return [], "memory store not available"
    from evalloop.learning.incident_records import meta

    try:
        with MemoryStore(memory_file) as memory:
            records = [(r, m) for r in memory.list(tags=["eval-failure", f"suite:{suite}"], limit=limit)
                       if (m := meta(r)) is not None and m.eval_suite == suite]
    except EvalloopError as exc:
        return [], f"memory store not readable: {exc.one_line()}"
    notes = [MemoryNote(id=record.id, information=record.information, tags=list(record.tags), scorer=m.scorer,
                        run_id=m.eval_run_id, created_at=record.created_at, status=m.status,
                        chronic_cases=m.chronic_cases) for record, m in records]
    return notes, "" if notes else "no failure memories for this suite"
