"""RunOptions: what one run is asked for, as one frozen value.

The CLI's ``evalloop run`` builds it from its flags, the Python API takes it as ``options=``
(``run_suite("similarity", options=RunOptions(epochs=3))``), and it travels unchanged through
:func:`evalloop.loop.pipeline.arun_suite` to :func:`evalloop.run.runner.execute`. A new option is
one field here plus the line that reads it. Each field's ``None`` means "the suite's setting, else
the project's".

What stays outside: the project's settings (:class:`evalloop.config.Settings`), the stores and
services a run uses, and the observers of a run in this process (``progress``, ``on_start``):
they say where and how it is watched, not what it is. ``select`` is a predicate but belongs
here: it decides which cases the run is (a partial run, never a baseline); it is a callable
because the case filters that build it (``-k``, ``--tag``, ``--held-out``) live above this level.
It is left out of :meth:`~pydantic.BaseModel.model_dump` and compared by identity.
"""

from __future__ import annotations

from collections.abc import Callable

from pydantic import BaseModel, ConfigDict, Field

from evalloop.llm.cache import CacheMode
from evalloop.suites.models import Case

__all__ = ["RunOptions"]


class RunOptions(BaseModel):
    """The options of one run (``evalloop run``'s flags; ``None``: the suite's, else the project's)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    epochs: int | None = Field(default=None, ge=1, description="run every case N times")
    limit: int | None = Field(default=None, ge=1, description="only the first N cases (a partial run)")
    concurrency: int | None = Field(default=None, ge=1, description="cases in flight at once")
    engine: str | None = Field(default=None, description="the reference operations' engine: auto, local, llm")
    model: str | None = Field(default=None, description="the LLM model of services built for the run")
    cache: CacheMode | None = Field(default=None, description="the LLM response cache: use, off, only")
    select: Callable[[Case], bool] | None = Field(
        default=None, exclude=True, repr=False, description="only the cases it accepts (a partial run)")
    max_cost: float | None = Field(default=None, ge=0.0, description="the run's cost budget in USD")
    batch: bool | None = Field(default=None, description="LLM calls through the provider's batch API")
    resume: str | None = Field(default=None, description="collect a killed batch run's requests instead")
    nightly: bool = Field(default=False, description="judge the run as one night of a series")
    bridge: bool = Field(default=True, description="re-grade the baseline when a scorer's measurement changed")
    ablation: tuple[str, ...] = Field(
        default=(), description="set by the pipeline: the held incidents this run ablates (lessons off, partial)")

    @property
    def partial(self) -> bool:
        """Whether the run is partial whatever it runs (an ablation: never a baseline)."""
        return bool(self.ablation)
