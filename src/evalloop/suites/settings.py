"""A suite's own settings blocks: ``verdict:`` (the project's verdict settings it overrides) and
``early_stop:`` (judges that stop grading once the verdict is settled)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from evalloop.config import VerdictSettings


class SuiteVerdict(VerdictSettings):
    """A suite's ``verdict:`` block: the project's verdict settings (``[verdict]``) it overrides
    for this suite, and its scorers' ``threshold`` and ``pass_mark`` (a scorer's own entry still
    wins). Only the keys it sets override anything (:meth:`overrides`); a key it does not know,
    or a value out of range, stops the suite when it is read (one line naming the key)."""

    threshold: float | None = Field(default=None, gt=0, lt=1)
    pass_mark: float | None = Field(default=None, ge=0, le=1)

    def overrides(self) -> dict[str, object]:
        """The settings the block sets, as the verdict policy takes them."""
        return self.model_dump(exclude_unset=True)


class EarlyStop(BaseModel):
    """``early_stop``: the suite's judges grade the cases in ``looks`` random batches and stop once
    the verdict is settled (:mod:`evalloop.verdicts.early_stop`). ``early_stop: true`` takes the
    defaults; ``spending`` shapes the boundaries; ``power_loss`` is the share of the power to see
    a threshold-size drop that a stop for "no change" may spend."""

    model_config = ConfigDict(extra="forbid")

    looks: int = Field(default=4, ge=2, le=20)
    spending: Literal["obrien-fleming", "pocock"] = "obrien-fleming"
    power_loss: float = Field(default=0.02, gt=0, le=0.2)

