"""The machine-readable summary of a run: one model, :class:`RunSummary`.

``evalloop run --json`` prints its dump; a scheduled fire's scheduler reads the child's output
back with the same model (:meth:`RunSummary.from_output`); the webhook sink posts it. Importing
this module loads no more than pydantic (the scheduler reads summaries without the run's code).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, ValidationError, field_serializer

if TYPE_CHECKING:
    from evalloop.loop.pipeline import RunReport


class Tokens(BaseModel):
    """The run's LLM tokens."""

    input: int
    output: int
    cache_write: int = 0
    cache_read: int = 0


class CaseMessage(BaseModel):
    """A newly failing case and its first message."""

    case: str
    message: str


class SummaryScorer(BaseModel):
    """One scorer of the run against its baseline (see ``verdicts.baseline.ScorerComparison``)."""

    scorer: str
    kind: str
    current: float | None
    n: int
    errored: int
    skipped: bool
    baseline: float | None
    window_runs: int
    drop: float | None
    threshold: float
    verdict: str
    fails: bool
    regression: bool
    p_value: float | None = None
    mdd: float | None = None
    grades: int = 0
    reason: str = ""
    first_error: str | None = None
    newly_failing: list[CaseMessage] = []
    newly_passing: list[str] = []
    expected_failures_passed: list[str] = []
    #: the verdict's evidence (``verdicts.verdict.Verdict``'s dump, without the case lists)
    evidence: dict[str, Any] | None = None


class TargetFailures(BaseModel):
    """How often the target failed its cases, beside the baseline's rate."""

    failures: int
    results: int
    rate: float
    baseline_rate: float | None


class FingerprintChangeSummary(BaseModel):
    """What changed since the baseline's latest run (``verdicts.identity.FingerprintChange``)."""

    previous_run: str
    changed: list[str]
    restarted: bool
    product: list[str] = []
    measurement: dict[str, list[str]] = {}
    bridged: list[str] = []


#: parts of the summary present only when the run has them (absent from the dump otherwise)
OPTIONAL_PARTS = ("target_stats", "strata", "memories", "ablation", "cases")


class RunSummary(BaseModel):
    """Everything a CI job, a dashboard or the scheduler needs to know about one run, without
    bulky outputs (``cases`` only when asked for)."""

    # a run's extras this model does not name yet are kept (and read back) as they are
    model_config = ConfigDict(extra="allow")

    run_id: str
    suite: str
    status: str
    valid: bool
    invalid_reason: str | None = None
    started_at: datetime
    ended_at: datetime | None = None
    code_version: str | None = None
    fingerprint: str | None = None
    n_cases: int
    epochs: int
    case_errors: int
    cost_usd: float
    tokens: Tokens
    llm_calls: int
    batched_calls: int = 0
    cache_hits: int
    llm_retries: int
    #: the worst scorer verdict (None: no scorer graded anything)
    verdict: str | None = None
    fails: bool
    regression: bool
    watch: bool
    fingerprint_change: FingerprintChangeSummary | None = None
    target_failures: TargetFailures | None = None
    scorers: list[SummaryScorer]
    notices: list[str] = []
    #: the baseline runs re-graded for a changed measurement, and their cost
    bridge: dict[str, Any] | None = None
    held_out: dict[str, Any] | None = None
    target_stats: dict[str, Any] | None = None
    strata: dict[str, Any] | None = None
    memories: list[dict[str, Any]] | None = None
    ablation: dict[str, Any] | None = None
    #: every case's input, expected, output and scores (``--json`` without ``--no-cases``)
    cases: list[dict[str, Any]] | None = None

    @field_serializer("started_at", "ended_at")
    def _iso(self, at: datetime | None) -> str | None:
        return at.isoformat() if at is not None else None

    @property
    def outcome(self) -> str:
        """One word for the run, as a fire's ledger records it (``ok`` when nothing was graded)."""
        return self.verdict or "ok"

    def dump(self) -> dict[str, Any]:
        """The JSON document (``--json``): the optional parts only when the run has them."""
        return self.model_dump(mode="json", exclude={k for k in OPTIONAL_PARTS if getattr(self, k) is None})

    @classmethod
    def from_output(cls, text: str) -> RunSummary:
        """The summary an ``evalloop run --json`` process printed last (a target may print
        before it). Raises :class:`SummaryError` with one line when it is not one."""
        # the summary is printed last, indented: its opening brace is a line of its own
        start = 0 if text.startswith("{\n") else text.rfind("\n{\n") + 1 or text.find("{")
        if start < 0:
            raise SummaryError("no JSON summary in the output" + (f" (it begins {text.strip()[:80]!r})"
                                                                  if text.strip() else " (it is empty)"))
        try:
            return cls.model_validate_json(text[start:])
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "the document"
            raise SummaryError(f"the JSON summary is not a run summary: {where}: {first['msg']}"
                               f" ({exc.error_count()} problem{'s' if exc.error_count() > 1 else ''})") from None


class SummaryError(ValueError):
    """A run's output that is not its JSON summary (one line)."""


def run_summary(report: RunReport) -> RunSummary:
    """The summary of one run."""
    run = report.executed.run
    return RunSummary(
        run_id=run.id,
        suite=run.suite,
        status=run.status,
        valid=run.valid,
        invalid_reason=run.invalid_reason,
        started_at=run.started_at,
        ended_at=run.ended_at,
        code_version=run.code_version,
        fingerprint=run.system_fingerprint,
        n_cases=run.n_cases,
        epochs=run.epochs,
        case_errors=report.executed.case_errors,
        cost_usd=round(run.cost_usd, 6),
        tokens=Tokens(input=run.input_tokens, output=run.output_tokens,
                      cache_write=run.cache_write_tokens or 0, cache_read=run.cache_read_tokens or 0),
        llm_calls=run.llm_calls,
        batched_calls=run.batched_calls or 0,
        cache_hits=run.cache_hits,
        llm_retries=run.llm_retries,
        verdict=worst.value if (worst := report.comparison.worst) else None,
        fails=report.comparison.fails,
        regression=report.comparison.has_regression,
        watch=bool(report.comparison.watches),
        fingerprint_change=_change(report),
        target_failures=_failures(report),
        scorers=[
            SummaryScorer(
                scorer=s.scorer,
                kind=s.kind,
                current=s.current,
                n=s.n,
                errored=s.errored,
                skipped=s.skipped,
                baseline=s.baseline,
                window_runs=s.window_runs,
                drop=s.drop,
                threshold=s.threshold,
                verdict=s.verdict,
                fails=s.fails,
                regression=s.is_regression,
                p_value=s.p_value,
                mdd=s.mdd,
                grades=s.grades,
                reason=s.reason,
                first_error=s.first_error or None,
                newly_failing=[CaseMessage(case=c, message=m) for c, m in s.newly_failing],
                newly_passing=s.newly_passing,
                expected_failures_passed=_expected_failures_passed(report, s.scorer),
                evidence=s.evidence.model_dump(mode="json", exclude={"newly_failing", "newly_passing", "status"})
                if s.evidence else None,
            )
            for s in report.comparison.scorers
        ],
        notices=report.notices,
        **{"bridge": None, **report.extras},
    )


def _expected_failures_passed(report: RunReport, scorer: str) -> list[str]:
    """The known-bad cases that ran through the target and passed (see ScorerResult)."""
    result = report.executed.results.get(scorer)
    return result.expected_failures_passed if result is not None else []


def _failures(report: RunReport) -> TargetFailures | None:
    rate = report.comparison.target_failures
    if rate is None:
        return None
    return TargetFailures(failures=rate.failures, results=rate.results, rate=rate.rate,
                          baseline_rate=rate.baseline_rate)


def _change(report: RunReport) -> FingerprintChangeSummary | None:
    change = report.comparison.fingerprint_change
    if change is None:
        return None
    return FingerprintChangeSummary(previous_run=change.previous_run, changed=change.changed,
                                    restarted=change.restarted, product=change.product,
                                    measurement=change.measurement, bridged=change.bridged)
