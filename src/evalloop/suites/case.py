"""A case: one fixture of a suite (input, expected, labels, a negative control's fixed output) and
the scope its tags name."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

SCOPE_TAG = "scope:"
"""A case tagged ``scope:<id>`` belongs to that scope (a conversation, a user): the cluster its
verdict's statistics resample, and a row of the per-scope tables."""


def scope_of(tags: Iterable[str]) -> str | None:
    """The scope a case's tags name (the first ``scope:`` tag), or None."""
    return next((t[len(SCOPE_TAG):] for t in tags if t.startswith(SCOPE_TAG)), None)


class Case(BaseModel):
    """One fixture: an input for the target, what is expected, and labels.

    ``expect: fail`` (or ``{scorer: fail}``) makes the case a *negative control*. With a fixed
    ``output`` it tests the scorers: the target is not called, the scorers it names grade that
    output, and a scorer that passes it is ``scorer broken``. Without one it runs through the
    target like any case: an *expected failure* of the product, which never blames a scorer.
    """

    model_config = ConfigDict(extra="forbid")

    id: str
    input: Any
    expected: Any = None
    tags: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    expect: Literal["pass", "fail"] | dict[str, Literal["pass", "fail"]] = "pass"
    output: Any = None  # a fixed output (given, even as null): graded in place of the target's
    #: cases with the same group are on the same side of every split (:mod:`evalloop.suites.split`)
    group: str | None = None

    def expects_fail(self, scorer: str) -> bool:
        """Whether this case is a negative control (known-bad) for the given scorer."""
        if isinstance(self.expect, dict):
            return self.expect.get(scorer, "pass") == "fail"
        return self.expect == "fail"

    @property
    def fixed_output(self) -> bool:
        """Whether the case carries its own output (the target is not called for it)."""
        return "output" in self.model_fields_set

    def tests_scorer(self, scorer: str) -> bool:
        """Whether this case is a negative control that tests ``scorer``: known-bad for it, with a
        fixed output. Only such a case can show the scorer broken."""
        return self.fixed_output and self.expects_fail(scorer)

    @field_validator("output")
    @classmethod
    def _output_for_controls(cls, v: Any, info: ValidationInfo) -> Any:
        expect = info.data.get("expect", "pass")
        if expect == "pass" or (isinstance(expect, dict) and "fail" not in expect.values()):
            raise ValueError("a fixed output is for a negative control that tests the scorer: add "
                             "'expect: fail' (or 'expect: {scorer: fail}'), or drop 'output' to run "
                             "the case through the target")
        return v

    @field_validator("id", mode="before")
    @classmethod
    def _id_text(cls, v: Any) -> Any:
        if isinstance(v, int) and not isinstance(v, bool):
            return str(v)
        if isinstance(v, str) and not v.strip():
            raise ValueError("case id must not be empty")
        return v

    @field_validator("tags", mode="before")
    @classmethod
    def _tags_list(cls, v: Any) -> Any:
        return [t.strip() for t in v.split(",") if t.strip()] if isinstance(v, str) else v

    @field_validator("group", mode="before")
    @classmethod
    def _group_text(cls, v: Any) -> Any:
        if isinstance(v, int) and not isinstance(v, bool):
            return str(v)
        if isinstance(v, str) and not v.strip():
            raise ValueError("a case's group must not be empty (leave it out for none)")
        return v

