"""What a suite names: its scorers (``ScorerRef``: a registered name, parameters, the label results
are stored under) and its target (``TargetRef``: ``module:function``, a moved built-in read under
its present name)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator


class ScorerRef(BaseModel):
    """A scorer as a suite uses it: a registered name, parameters, and an optional threshold.

    ``as`` names this use of the scorer in results and history, so one scorer may be listed
    more than once with different parameters; without it a second use of ``hit``/``recall``/…
    with a ``k`` param is named ``hit@5`` (see :attr:`label`).
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str
    params: dict[str, Any] = Field(default_factory=dict)
    threshold: float | None = Field(default=None, gt=0.0, lt=1.0)
    pass_mark: float | None = Field(default=None, ge=0.0, le=1.0)
    min_score: float | None = Field(default=None, ge=0.0, le=1.0)  # absolute floor (0 turns it off)
    timeout: float | None = Field(default=None, gt=0)  # seconds per grading; else the suite's timeout
    alias: str | None = Field(default=None, alias="as", pattern=r"^[A-Za-z0-9][A-Za-z0-9_.@:-]*$")
    _auto_label: str | None = PrivateAttr(default=None)

    @property
    def label(self) -> str:
        """The name results are stored under: ``as``, else an automatic ``name@k``, else ``name``."""
        return self.alias or self._auto_label or self.name


#: built-in targets whose module was renamed: a suite naming the old ref still runs (the ref is read
#: as the new one, issue #43: ``evalloop.retrieval.suite`` is now ``dataset_cases``, its targets are named
#: where they live)
MOVED_TARGETS = {"evalloop.retrieval.suite:AnswerTarget": "evalloop.retrieval.answer_target:AnswerTarget"}
MOVED_TARGET_MODULES = {"evalloop.retrieval.suite:": "evalloop.retrieval.suite_targets:"}


class TargetRef(BaseModel):
    """The system under test: ``module:function`` plus keyword parameters for it."""

    model_config = ConfigDict(extra="forbid")

    ref: str
    params: dict[str, Any] = Field(default_factory=dict)

    @field_validator("ref")
    @classmethod
    def _moved(cls, ref: str) -> str:
        """A built-in target's ref under its module's present name (:data:`MOVED_TARGETS`)."""
        if ref in MOVED_TARGETS:
            return MOVED_TARGETS[ref]
        old = next((p for p in MOVED_TARGET_MODULES if ref.startswith(p)), None)
        return ref if old is None else MOVED_TARGET_MODULES[old] + ref[len(old):]

