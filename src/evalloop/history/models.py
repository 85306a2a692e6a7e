"""The stored history: SQLModel tables for runs, per-scorer summaries, case results and scores."""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum

from sqlalchemy import Index
from sqlmodel import Field, SQLModel


def utcnow() -> datetime:
    return datetime.now(UTC)


class RunStatus(StrEnum):
    """Where a run ended. Only ``completed`` runs that are also valid feed baselines."""

    RUNNING = "running"
    COMPLETED = "completed"
    INTERRUPTED = "interrupted"
    FAILED = "failed"


class Run(SQLModel, table=True):
    """One execution of one suite."""

    __tablename__ = "runs"

    id: str = Field(primary_key=True)
    suite: str = Field(index=True)
    status: str = Field(default=RunStatus.RUNNING, index=True)
    valid: bool = True
    invalid_reason: str | None = None
    partial: bool = False  # run on a subset (--limit): compared, but never a baseline
    started_at: datetime = Field(default_factory=utcnow, index=True)
    ended_at: datetime | None = None
    code_version: str | None = None
    fingerprint: str = "{}"
    fingerprint_hash: str = ""
    # the fingerprint without what changes on its own (injected failure memories, case files):
    # a change here is a change of the system under test, and the baseline says so
    base_fingerprint: str | None = None
    n_cases: int = 0
    epochs: int = 1
    case_errors: int = 0
    target_failures: int | None = None  # case results the target failed (None: older evalloop)
    infra_failures: int | None = None   # case results lost to API/network faults (errored)
    cost_usd: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    llm_calls: int = 0
    cache_hits: int = 0
    llm_retries: int = 0
    notes: str = "{}"
    origin: str = "local"


class ScorerSummary(SQLModel, table=True):
    """Per run and scorer: the mean over non-errored cases, counts, and the verdict."""

    __tablename__ = "scorer_summaries"

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="runs.id", index=True)
    scorer: str = Field(index=True)
    kind: str
    mean: float | None = None
    n: int = 0
    errored: int = 0
    skipped: bool = False
    threshold: float = 0.1
    verdict: str | None = None
    baseline: float | None = None
    drop: float | None = None
    p_value: float | None = None
    mdd: float | None = None  # the relative drop this run's verdict would catch 90 % of the time
    # whether this scorer of this run may serve as a baseline (set once, when the run is judged;
    # see evalloop.history.eligibility): completed, valid, complete, graded, scorer not broken
    eligible: bool | None = None
    details: str = "{}"


class CaseResult(SQLModel, table=True):
    """One case's output (or error) in one epoch of a run."""

    __tablename__ = "case_results"
    __table_args__ = (Index("ix_case_results_run_case", "run_id", "case_id", "epoch"),)

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="runs.id")  # indexed first by ix_case_results_run_case
    case_id: str
    epoch: int = 0
    tags: str | None = None
    output: str | None = None
    error: str | None = None
    failure: str | None = None  # "target" (a real 0) or "infra" (errored); see evalloop.failures
    latency_ms: float = 0.0
    cost_usd: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0


class CaseScore(SQLModel, table=True):
    """One scorer's grade of one case's output in one epoch."""

    __tablename__ = "case_scores"
    __table_args__ = (Index("ix_case_scores_run_scorer", "run_id", "scorer", "case_id"),)

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="runs.id")  # indexed first by ix_case_scores_run_scorer
    case_id: str
    epoch: int = 0
    scorer: str
    value: float
    errored: bool = False
    skipped: bool = False
    message: str = ""
    meta: str | None = None


class ScoreVector(SQLModel, table=True):
    """One scorer's per-case scores of one run, compact: float64 per case in case order (NaN
    where a case has no grade), for the case list named by ``digest``
    (:func:`evalloop.scorevec.ids_digest`). Baselines read it instead of the run's score rows
    when the case list is the same; the rows stay the record."""

    __tablename__ = "score_vectors"
    __table_args__ = (Index("ix_score_vectors_run_scorer", "run_id", "scorer"),)

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="runs.id")
    scorer: str
    digest: str
    n: int
    data: bytes


class CalibrationRecord(SQLModel, table=True):
    """What ``evalloop calibrate`` measured for one suite and scorer."""

    __tablename__ = "calibrations"

    id: int | None = Field(default=None, primary_key=True)
    suite: str = Field(index=True)
    scorer: str
    kind: str
    created_at: datetime = Field(default_factory=utcnow)
    repeats: int
    n_cases: int
    mean: float
    noise_sd: float
    false_alarm_rate: float
    suggested_threshold: float | None = None
    minimal_detectable_drop: float | None = None
    per_case_variance: str = "{}"
