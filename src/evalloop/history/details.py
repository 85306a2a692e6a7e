"""What a scorer summary's ``details``, a run's ``notes`` and its ``fingerprint`` hold, each read in one place.

They are JSON objects written by many versions of evalloop: every reader in the package (reports,
the viewer, the verdict, the runner) goes through :func:`summary_details`, :func:`run_notes` or
:func:`run_fingerprint`, which validate them into the models here (unknown keys kept, a missing or
unreadable value the model's default); none parses them itself. The pass mark's fallback is here
once: :data:`PASS_MARK_FALLBACK`, for rows written before the pass mark was stored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from evalloop.history.models import JSONObject, JSONValue, Run, ScorerSummary, as_object, dumps

__all__ = ["PASS_MARK_FALLBACK", "AcceptedRecord", "JSONObject", "JSONValue", "RunNotes", "SummaryDetails",
           "json_object", "jsonable", "run_fingerprint", "run_notes", "summary_details"]

M = TypeVar("M", bound=BaseModel)
#: a row written before the pass mark was stored in its details: the scorers' default then
PASS_MARK_FALLBACK = 0.5


class AcceptedRecord(BaseModel):
    """An acceptance as a summary records it (``evalloop accept``: history.acceptance)."""

    model_config = ConfigDict(extra="allow")

    reason: str = ""
    at: str = ""
    by: str = ""


class SummaryDetails(BaseModel):
    """A scorer summary's details: what its verdict recorded beside the columns."""

    model_config = ConfigDict(extra="allow")

    pass_mark: float = PASS_MARK_FALLBACK
    controls: list[str] = []
    accepted: AcceptedRecord | None = None
    evidence: dict[str, JSONValue] = {}
    policy: dict[str, JSONValue] = {}
    fingerprint_change: dict[str, JSONValue] = {}
    window: list[str] | None = None  # the run ids the verdict compared with (history.window)
    chart: dict[str, JSONValue] | None = None  # a nightly verdict's sequential chart (verdicts.sequential)
    # what the run recorded of its grades (run.grades.ScorerResult.details), as its verdict reads it
    first_error: str | None = ""
    grades: int | None = 0
    skip: str | None = None  # why the scorer did not run
    scorer_controls: list[str] | None = []  # the controls that test the scorer (None: all of them)
    binary: bool | None = None
    invalid: str | None = None  # why the run is invalid for this scorer

    @property
    def reason(self) -> str:
        """The words the verdict was given (what the rule showed)."""
        return str(self.evidence.get("reason") or "")

    @property
    def alpha(self) -> float:
        """The significance level the verdict's policy used."""
        found = self.policy.get("alpha")
        return float(found) if isinstance(found, int | float) else 0.05


class RunNotes(BaseModel):
    """A run's notes: where and how it ran, and what started it."""

    model_config = ConfigDict(extra="allow")

    fire: str | int | None = None  # the scheduled fire's ledger entry that started it
    bridge_of: str | None = None
    resumed_from: str | None = None
    target_stats: dict[str, JSONValue] | None = None  # the target's own measurements (its ``run_stats()``)
    ablation: list[str] = []  # the incidents the run was an ablation for (learning.evidence)


def json_object(stored: str | Mapping[str, JSONValue] | None) -> dict[str, JSONValue]:
    """A stored JSON object (as its column reads it, or its text from a raw SQL read) as a new dict,
    for a writer that adds a key to it (``{}``: none, unreadable, or not an object)."""
    return dict(stored) if isinstance(stored, Mapping) else as_object(stored)


def jsonable(value: Mapping[str, object] | str | None) -> dict[str, JSONValue]:
    """A dict as its JSON column holds it (a value JSON has no type for, as its text; JSON text
    parsed): what a writer sets, so the object it keeps reads the same as the row read back."""
    return as_object(value if isinstance(value, str | None) else dumps(value))


def summary_details(summary: ScorerSummary | str | Mapping[str, JSONValue] | None) -> SummaryDetails:
    """The summary's details (the summary, or its details column) as a model (an unreadable or
    malformed field: its default)."""
    return _readable(SummaryDetails, json_object(summary.details if isinstance(summary, ScorerSummary) else summary))


def run_notes(notes: Run | str | Mapping[str, JSONValue] | None) -> RunNotes:
    """A run's notes (the run, or its notes column) as a model (unreadable: empty)."""
    return _readable(RunNotes, json_object(notes.notes if isinstance(notes, Run) else notes))


def run_fingerprint(fingerprint: Run | str | Mapping[str, JSONValue] | None) -> dict[str, JSONValue]:
    """A run's fingerprint (the run, or its fingerprint column): what described the system under
    test and its measurement (:mod:`evalloop.history.identity` compares them); ``{}`` unreadable."""
    return json_object(fingerprint.fingerprint if isinstance(fingerprint, Run) else fingerprint)


def _readable(model: type[M], data: dict[str, JSONValue]) -> M:
    """``data`` as ``model``, keeping what is readable: a field that does not validate is dropped
    (its default), the others kept."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        bad = {str(e["loc"][0]) for e in exc.errors() if e["loc"]}
        return model.model_validate({k: v for k, v in data.items() if k not in bad})
