"""The runs an incident reads as evidence, from the history: which lesson a run had, which runs
were ablations, and the graded scores of an incident's runs since it opened.

The state machine (:mod:`evalloop.learning.incident_machine`) is pure; this module is the one
place that turns stored runs into what it reads (:class:`~evalloop.learning.incident_machine.Past`).
A run *had* an incident's lesson when its target fingerprint's ``injected`` memories name the
incident (a target with a ``lessons``/``lesson_records`` parameter, or a reference operation
reading the failure patterns); a run *is an ablation* for an incident when its notes say so
(``{"ablation": [incident ids]}``, written by :mod:`evalloop.loop.ablation`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from evalloop.history.details import run_fingerprint, run_notes
from evalloop.learning.incident_machine import Past

if TYPE_CHECKING:
    from evalloop.history.models import Run

#: the most runs of an incident read back (evidence and the join rule need a handful)
RECENT = 12


def injected_ids(run: Run) -> set[str]:
    """The failure memories injected into the run's target (its fingerprint's ``injected``)."""
    fingerprint = run_fingerprint(getattr(run, "fingerprint", None))
    target = fingerprint.get("target_fingerprint")
    injected = (target.get("injected") if isinstance(target, dict) else None) or fingerprint.get("injected")
    memories = injected.get("memories") if isinstance(injected, dict) else None
    return {str(m) for m in memories} if isinstance(memories, list) else set()


def ablation_ids(run: Run) -> set[str]:
    """The incidents the run was an ablation for (none: an ordinary run)."""
    return set(run_notes(getattr(run, "notes", None)).ablation)


class History(Protocol):
    """What the learning step reads of the history (:class:`StoredHistory`; tests may give another)."""

    def since(self, suite: str, run_id: str, scorer: str, incident: str, before: Run) -> list[Past]: ...

    def scores(self, run_ids: Sequence[str], scorer: str) -> list[Mapping[str, float]]: ...


class RunStore(Protocol):
    """What :class:`StoredHistory` reads of the history store (its runs and their case scores)."""

    def get_run(self, run_id: str) -> Run | None: ...

    def runs(self, suite: str | None = None, limit: int | None = 20,
             statuses: Sequence[str] | None = None) -> list[Run]: ...

    def case_scores(self, run_id: str, scorer: str) -> dict[str, float]: ...


class StoredHistory:
    """:class:`History` over a :class:`~evalloop.history.store.HistoryStore`."""

    def __init__(self, store: RunStore) -> None:
        self.store = store

    def since(self, suite: str, run_id: str, scorer: str, incident: str, before: Run) -> list[Past]:
        """The incident's valid runs from ``run_id`` (the one that opened it) up to ``before``
        (excluded), newest first: its full runs and its ablations (other partial runs are no
        evidence), at most :data:`RECENT`."""
        from evalloop.history.models import RunStatus

        start = self.store.get_run(run_id) if run_id else None
        out: list[Past] = []
        if start is None:  # the run that opened it is gone: no evidence but this run's
            return out
        for run in self.store.runs(suite, limit=RECENT * 4, statuses=[RunStatus.COMPLETED]):
            if run.id == before.id or (run.started_at, run.id) > (before.started_at, before.id):
                continue
            if (run.started_at, run.id) < (start.started_at, start.id):
                break
            ablation = incident in ablation_ids(run)
            if not run.valid or (run.partial and not ablation):
                continue
            out.append(Past(run.id, ablation, incident in injected_ids(run), self.store.case_scores(run.id, scorer)))
            if len(out) >= RECENT:
                break
        return out

    def scores(self, run_ids: Sequence[str], scorer: str) -> list[Mapping[str, float]]:
        return [self.store.case_scores(r, scorer) for r in run_ids]
