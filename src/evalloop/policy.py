"""The verdict policy: how one scorer's run is judged (rule, threshold, significance, floor, flaky cases).

The knobs a project or suite sets are declared once, in :class:`evalloop.config.VerdictSettings`;
:class:`VerdictPolicy` adds what the runner binds to every scorer of a suite (its threshold, pass
mark and floor) and stores with the run, and :mod:`evalloop.verdict` applies. It knows no statistics.
"""

from __future__ import annotations

from pydantic import Field

from evalloop.config import VerdictSettings

TOLERANCE = 1e-9  # a drop computed as 0.1499999999 meets a 0.15 threshold
MIN_EFFECT_SHARE = 1 / 3  # rule="paired": default minimum effect as a share of the threshold


class VerdictPolicy(VerdictSettings):
    """How one scorer's verdict is reached: the project's settings plus what is bound per scorer."""

    threshold: float = Field(gt=0, lt=1)
    pass_mark: float = Field(0.5, ge=0, le=1)
    nightly: bool = False  # judged as one night of a series (scheduled fires, ``run --nightly``)
    permutations: int = Field(10_000, ge=1)
    resamples: int = Field(10_000, ge=100)  # bootstrap resamples for the CI
    ci_level: float = Field(0.95, gt=0, lt=1)
    seed: int = 0

    @property
    def effective_min_effect(self) -> float:
        """The minimum relative drop the paired rule asks for."""
        return self.threshold * MIN_EFFECT_SHARE if self.min_effect is None else self.min_effect
