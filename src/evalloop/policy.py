"""The verdict policy: how one scorer's run is judged (rule, threshold, significance, flaky cases).

A plain settings model, shared by the runner (which binds one to every scorer of a suite and
stores it with the run) and :mod:`evalloop.verdicts.verdict` (which applies it). It knows no statistics.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

TOLERANCE = 1e-9  # a drop computed as 0.1499999999 meets a 0.15 threshold
MIN_EFFECT_SHARE = 1 / 3  # rule="paired": default minimum effect as a share of the threshold
Rule = Literal["evidence", "threshold", "paired"]


class VerdictPolicy(BaseModel):
    """How a verdict is reached: rule, threshold, significance and flaky-case handling."""

    model_config = ConfigDict(extra="forbid")

    threshold: float = Field(gt=0, lt=1)
    rule: Rule = "evidence"
    alpha: float = Field(0.05, gt=0, lt=1)
    reach_level: float = Field(0.9999, gt=0.5, lt=1)  # rule="evidence": one-sided confidence of the reach
    min_effect: float | None = Field(None, ge=0)  # rule="paired"; None = threshold / 3
    pass_mark: float = Field(0.5, ge=0, le=1)
    flaky_flips: int = Field(2, ge=0)
    quarantine_flaky: bool = False
    restart_on_change: bool = False  # a changed target fingerprint starts a new baseline window
    permutations: int = Field(10_000, ge=1)
    resamples: int = Field(10_000, ge=100)  # bootstrap resamples for the CI
    ci_level: float = Field(0.95, gt=0, lt=1)
    seed: int = 0

    @model_validator(mode="before")
    @classmethod
    def _retired(cls, data: Any) -> Any:
        if isinstance(data, dict) and "require_significance" in data:
            raise ValueError("require_significance is retired: every rule now needs significance "
                             "(a drop that is not significant is a 'watch'); remove the key")
        return data

    @property
    def effective_min_effect(self) -> float:
        """The minimum relative drop the paired rule asks for."""
        return self.threshold * MIN_EFFECT_SHARE if self.min_effect is None else self.min_effect
