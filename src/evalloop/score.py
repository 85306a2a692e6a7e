"""Scores and scorer kinds: the value a scorer returns, whose failure a failed case is, the
defaults each kind carries, and whether a score meets its pass mark (:func:`passes`)."""

from __future__ import annotations

import math
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

if TYPE_CHECKING:
    import numpy as np


class Failure(StrEnum):
    """Whose failure a failed case is (the rule that decides it: :mod:`evalloop.run.failures`)."""

    TARGET = "target"
    INFRA = "infra"


class ScorerKind(StrEnum):
    """How a scorer grades: pure computation, a real LLM call of the target, or a second model."""

    HEURISTIC = "heuristic"
    LLM_OPERATION = "llm_operation"
    LLM_JUDGE = "llm_judge"

    @property
    def default_threshold(self) -> float:
        """Relative drop from the baseline that counts as a regression (ADR defaults)."""
        return {"heuristic": 0.10, "llm_operation": 0.15, "llm_judge": 0.20}[self.value]

    @property
    def default_target(self) -> float:
        """Absolute success target for the kind (ADR success metrics)."""
        return {"heuristic": 0.95, "llm_operation": 0.80, "llm_judge": 0.70}[self.value]


class Score(BaseModel):
    """One grade of one output: a value in [0, 1], a message, and whether grading itself failed.

    ``errored`` means the grader could not grade (a judge that did not answer, a scorer that
    raised): the value is kept for display but excluded from means and baselines. ``skipped``
    means the scorer did not run at all (for example a judge with no LLM configured).
    ``failure`` says whose failure a failed case is (see :mod:`evalloop.run.failures`): ``target``
    (a real 0: the target raised, timed out, or its output could not be parsed) or ``infra``
    (errored: the API or the network failed).
    """

    #: checked by pydantic's own constraints (no Python validator: a Score is built per case)
    value: float = Field(ge=0.0, le=1.0, allow_inf_nan=False)
    message: str = ""
    errored: bool = False
    skipped: bool = False
    failure: Failure | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def error(cls, message: str, **metadata: Any) -> Score:
        """A grading failure: shown and counted, never passed off as a real score."""
        return cls(value=0.5, message=message, errored=True, metadata=metadata)

    @classmethod
    def target_failure(cls, reason: str) -> Score:
        """The target failed its case (raised, timed out, an unusable reply): a real 0."""
        return cls(value=0.0, message=f"target failure: {reason}", failure=Failure.TARGET)

    @classmethod
    def unparseable(cls, message: str) -> Score:
        """An output the scorer cannot parse (not JSON, not the shape it grades): the target's
        failure, a real 0 — never errored."""
        return cls(value=0.0, message=message, failure=Failure.TARGET)

    @classmethod
    def infrastructure(cls, reason: str) -> Score:
        """The API or the network failed, not the product: errored, never a real score."""
        return cls(value=0.5, message=f"infrastructure: {reason}", errored=True, failure=Failure.INFRA)

    @classmethod
    def skip(cls, message: str) -> Score:
        """A scorer that did not run (left out of the run's comparison)."""
        return cls(value=0.0, message=message, skipped=True)


def passes(value: float, pass_mark: float) -> bool:
    """Whether a score meets the pass mark: the one comparison of a score with a pass mark
    (a NaN, a case with no grade, never passes). What a pass *means* for a case — a known-bad
    control fails when it passes, a case whose every grade errored is neither — is
    :func:`evalloop.verdicts.outcome.case_outcome`."""
    return value >= pass_mark


def passes_many(values: np.ndarray, pass_mark: float) -> np.ndarray:
    """:func:`passes` for every score of an array at once (NaN, no grade: False)."""
    return values >= pass_mark


def fails_many(values: np.ndarray, pass_mark: float) -> np.ndarray:
    """The scores of an array that were graded (not NaN) and do not pass."""
    return (values == values) & ~passes_many(values, pass_mark)  # NaN != NaN: not graded


class ScoreOutOfRange(ValueError):
    """A scorer gave a value outside [0, 1]."""


def coerce_score(raw: Any) -> Score:
    """Turn what a scorer returned (Score, number, bool, dict) into a Score, or raise ValueError."""
    if isinstance(raw, Score):
        return raw
    if isinstance(raw, bool | int | float):
        if math.isfinite(raw) and not 0.0 <= raw <= 1.0:
            raise ScoreOutOfRange(f"returned {raw!r}, outside [0, 1]")
        return Score(value=float(raw))
    if isinstance(raw, dict):
        return Score.model_validate(raw)
    raise ValueError(f"a scorer must return a Score, a number or a dict, not {type(raw).__name__}")


def scorer_failure(name: str, exc: BaseException) -> str:
    """One line for a scorer that raised — a value out of range named as such, never pydantic's
    multi-line report with its URL."""
    from pydantic import ValidationError

    if isinstance(exc, ValidationError) and exc.title == "Score":
        err = exc.errors()[0]
        if tuple(err["loc"]) == ("value",) and err["type"] in ("less_than_equal", "greater_than_equal"):
            exc = ScoreOutOfRange(f"returned {err['input']!r}, outside [0, 1]")
        elif tuple(err["loc"]) == ("value",) and err["type"] == "finite_number":
            return (f"scorer {name} built an invalid Score: value: score value must be a finite number, "
                    f"got {err['input']}")
        else:
            from evalloop.validation import first_error

            return f"scorer {name} built an invalid Score: {first_error(exc)}"
    if isinstance(exc, ScoreOutOfRange):
        return f"scorer {name} {exc} (ScoreOutOfRange) — return a value in [0, 1]: scale or clamp it"
    text = " ".join(str(exc).split())
    return f"scorer {name} raised {type(exc).__name__}: {text}"
