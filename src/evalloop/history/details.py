"""What a scorer summary's ``details`` and a run's ``notes`` hold, each read in one place.

Both are JSON objects in text columns, written by many versions: every reader in history/ goes
through :func:`summary_details` or :func:`run_notes`, which validate them into the models here
(unknown keys kept, a missing or unreadable value the model's default). The pass mark's fallback
is here once: :data:`PASS_MARK_FALLBACK`, for rows written before the pass mark was stored.
"""

from __future__ import annotations

import json

from pydantic import BaseModel, ConfigDict, ValidationError
from typing_extensions import TypeAliasType

from evalloop.history.models import Run, ScorerSummary

#: a row written before the pass mark was stored in its details: the scorers' default then
PASS_MARK_FALLBACK = 0.5
#: JSON as stored: what a key this module does not model holds
JSONValue = TypeAliasType("JSONValue", "str | int | float | bool | None | list[JSONValue] | dict[str, JSONValue]")


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


def json_object(text: str | None) -> dict[str, JSONValue]:
    """Stored JSON text as an object, for a writer that adds a key to it (``{}``: none, unreadable)."""
    try:
        found = json.loads(text or "{}")
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def summary_details(summary: ScorerSummary) -> SummaryDetails:
    """The summary's details as a model (an unreadable or malformed field: its default)."""
    data = json_object(summary.details)
    try:
        return SummaryDetails.model_validate(data)
    except ValidationError as exc:  # keep what is readable: drop the fields that are not
        bad = {str(e["loc"][0]) for e in exc.errors() if e["loc"]}
        return SummaryDetails.model_validate({k: v for k, v in data.items() if k not in bad})


def run_notes(notes: Run | str | None) -> RunNotes:
    """A run's notes (the run, or its notes column) as a model (unreadable: empty)."""
    data = json_object(notes.notes if isinstance(notes, Run) else notes)
    try:
        return RunNotes.model_validate(data)
    except ValidationError:
        return RunNotes()
