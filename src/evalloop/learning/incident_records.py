"""What an incident record says: its text, its metadata and its tags, built from one run.

This module owns the record's content and nothing that touches a store: the failure text (from
:mod:`evalloop.learning.feedback`; run ids, case ids and counts go in metadata, never in the
text), the metadata every reader uses (``status``, ``failing_cases``, ``chronic_cases``, runs
seen, …), the tags (``eval-failure``, ``suite:<name>``, ``scorer:<name>``, ``status:<state>``) and
the one line :func:`describe` shows for an incident. Held-out cases never reach any of it
(:func:`learn_only`). Its metadata is one model, :class:`IncidentMeta` (read with :func:`meta`, written with
:meth:`IncidentMeta.dump`): no other module reads an incident's metadata by key. The state
machine is :mod:`evalloop.learning.incident_machine`; the store side is
:mod:`evalloop.learning.incidents`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, TypeVar

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from evalloop.learning import feedback
from evalloop.learning.incident_machine import Cause, Incident, Level, Seen, State
from evalloop.memory.records import FoundMemory, MemoryRecord
from evalloop.verdicts.baseline import Comparison, ScorerComparison, relative_drop

if TYPE_CHECKING:
    from evalloop.suites.models import Case

KIND = "eval-failure"
MAX_IDS = 50
MAX_RUNS = 20


def failure_tags(suite: str, scorer: str, status: str = "open") -> list[str]:
    """The tags of an incident of ``suite``'s ``scorer`` in ``status`` (what
    :func:`evalloop.learning.incidents.incidents` lists by)."""
    return [KIND, f"suite:{suite}", f"scorer:{scorer}", f"status:{status}"]


#: a JSON object as metadata holds it (a correction, a revision's summary)
JsonObject = dict[str, JsonValue]
_V = TypeVar("_V")


def stored(item: MemoryRecord | FoundMemory) -> MemoryRecord:
    """The record itself: a search hit's record, or the record."""
    return item.record if isinstance(item, FoundMemory) else item


def meta_of(record: MemoryRecord | FoundMemory) -> Mapping[str, JsonValue]:
    """A stored record's metadata (a search hit's record's, or the record's own)."""
    return stored(record).metadata


def now_of(comparison: Comparison) -> str:
    """When the run happened (its end, else its start), as the record's timestamps say it."""
    run = comparison.run
    return (run.ended_at or run.started_at or datetime.now(UTC)).isoformat()


@dataclass
class Details:
    """The failing cases' details a record's text and corrections are written from."""

    cases: Mapping[str, Case] = field(default_factory=dict)
    outputs: Mapping[str, str | None] = field(default_factory=dict)
    scores: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    reasons: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    baseline: Callable[[ScorerComparison], Mapping[str, float]] | None = None
    held_out: frozenset[str] = frozenset()
    #: what of a held-out case is removed from a learn case's output or reason (heldout.Redactor)
    redact: Callable[[str | None], str | None] | None = None


def learn_only(details: Details) -> Details:
    """The details without any held-out case: no held-out case is remembered, shown or corrected."""
    held = details.held_out
    if not held:
        return details

    def keep(m: Mapping[str, _V]) -> dict[str, _V]:
        return {c: v for c, v in m.items() if c not in held}

    return Details(keep(details.cases), keep(details.outputs), {s: keep(m) for s, m in details.scores.items()},
                   {s: keep(m) for s, m in details.reasons.items()}, details.baseline, held, details.redact)


def text_scores(seen: Seen) -> dict[str, float | None]:
    """The scores an incident's text says, from the learn cases graded in this run (``seen``):
    their mean now, the same cases' mean in the baseline's last run, and the relative drop."""
    now = seen.scores
    current = sum(now.values()) / len(now) if now else None
    before = [seen.baseline[c] for c in now if c in seen.baseline]
    baseline = sum(before) / len(before) if before else None
    return {"learn_score": current, "learn_baseline": baseline, "learn_drop": relative_drop(baseline, current)}


def record_text(comparison: Comparison, s: ScorerComparison, seen: Seen, shown: list[str],
                details: Details) -> str:
    """The incident's text: the learn cases' numbers and the ``shown`` cases with their details.
    Every figure is of learn cases (``seen`` holds no held-out case), so they agree: ``newly
    failing`` and ``chronic`` are among the failing cases, ``shown`` are failing and not chronic."""
    every = feedback.failing_cases(shown[:MAX_IDS], details.cases, details.outputs,
                                   details.reasons.get(s.scorer, {}), details.redact)
    figures = text_scores(seen)
    failing = seen.failing
    return feedback.information(feedback.Incident(
        suite=comparison.run.suite, scorer=s.scorer, kind=s.kind, current=figures["learn_score"],
        baseline=figures["learn_baseline"], drop=figures["learn_drop"], graded=len(seen.scores),
        passed=len(seen.scores) - len(failing),
        newly_failing=sum(1 for c in set(seen.newly_failing) if c in failing),
        newly_passing=sum(1 for c in s.newly_passing if c not in details.held_out and seen.passed(c)),
        chronic=len(seen.chronic), failing=every[: feedback.MAX_CASES], failing_total=len(shown),
        patterns=feedback.common_patterns(every)))


class IncidentMeta(BaseModel):
    """An incident record's metadata: the one model it is read into and written from.

    Every key a reader may use is a field; keys this version does not know (an older or newer
    evalloop, another writer) are kept as they are (``extra="allow"``). Read with :func:`meta`,
    write with :meth:`dump` — nothing outside this module reads an incident's metadata by key."""

    model_config = ConfigDict(extra="allow")

    kind: str = KIND
    eval_name: str | None = None
    eval_suite: str | None = None
    scorer: str | None = None
    status: str = State.OPEN.value
    cause: str = Cause.REGRESSION.value
    # the numbers the memory's text says (set again only when the text is written again)
    baseline_score: float | None = None
    current_score: float | None = None
    drop_percentage: float | None = None
    text_scores: dict[str, float | None] | None = None  # the learn cases' scores the text says
    latest_score: float | None = None  # the last run's, whatever the text says
    latest_drop: float | None = None
    eval_run_id: str | None = None  # the run that opened it
    last_run_id: str | None = None
    eval_run_ids: list[str] = Field(default_factory=list)
    since_run_id: str | None = None  # the run that (re)opened it: its evidence starts there
    runs_seen: int = 1
    code_version: str | None = None
    first_seen: str | None = None
    last_seen: str | None = None
    timestamp: str | None = None
    pass_mark: float = 0.5
    failing_cases: list[str] = Field(default_factory=list)  # the remembered cases
    failing_count: int = 0
    chronic_cases: list[str] = Field(default_factory=list)
    corrections: list[JsonObject] = Field(default_factory=list)
    still_failing: list[str] | None = None  # the cases its text shows
    levels_before: dict[str, list[float]] = Field(default_factory=dict)  # case → [mean, pass rate, runs]
    noise: float | None = None
    baseline_run_ids: list[str] = Field(default_factory=list)
    previous_id: str | None = None
    reopened: int = 0
    reopened_run_id: str | None = None
    reopened_at: str | None = None
    closed: list[str] = Field(default_factory=list)
    resolved_run_id: str | None = None
    resolved_at: str | None = None
    accepted_reason: str | None = None
    accepted_run_id: str | None = None
    accepted_at: str | None = None
    held_run_id: str | None = None
    held_at: str | None = None
    promoted_reason: str | None = None
    promoted_at: str | None = None
    rewrite: bool = False  # the text may show a held-out case: written again at the next update
    revisions: list[JsonObject] | None = None  # prompt revisions seeded by it (learning.revisions)

    @property
    def state(self) -> State:
        return State(self.status) if self.status in list(State) else State.OPEN

    @property
    def levels(self) -> dict[str, Level]:
        return {c: Level(float(v[0]), float(v[1]), int(v[2])) for c, v in self.levels_before.items()
                if isinstance(v, list | tuple) and len(v) == 3}

    def with_levels(self, levels: Mapping[str, Level]) -> dict[str, list[float]]:
        """``levels_before`` with these cases' levels added (rounded as stored)."""
        return {**self.levels_before, **{c: [round(v.mean, 6), round(v.passed, 6), v.runs] for c, v in levels.items()}}

    def shown(self) -> set[str]:
        """Every case its text or corrections may show: its remembered cases, the cases its text
        shows and its corrections' cases (what :mod:`evalloop.learning.heldout` checks)."""
        ids = set(self.failing_cases) | set(self.still_failing or [])
        return ids | {str(c.get("id")) for c in self.corrections}

    def dump(self) -> JsonObject:
        """The metadata to store: every key an incident always had, the others when they have a value."""
        out = self.model_dump(mode="json")
        return {k: v for k, v in out.items() if k in ALWAYS or (v is not None and (k != "rewrite" or v))}


#: the keys every incident record has carried (null or not), as readers of older versions expect them
ALWAYS = frozenset({"kind", "eval_name", "eval_suite", "scorer", "status", "baseline_score", "current_score",
                    "drop_percentage", "latest_score", "latest_drop", "eval_run_id", "last_run_id", "eval_run_ids",
                    "runs_seen", "code_version", "first_seen", "last_seen", "timestamp", "pass_mark",
                    "failing_cases", "failing_count", "chronic_cases", "corrections", "still_failing"})


def meta(record: MemoryRecord | FoundMemory) -> IncidentMeta | None:
    """An incident record's metadata (None for any other memory, or metadata no incident has)."""
    data = meta_of(record)
    if data.get("kind") != KIND:
        return None
    try:
        return IncidentMeta.model_validate(dict(data))
    except ValidationError:
        return None


#: what a closed or held record says about how it left ``open``; dropped when it is open again
CLOSING_KEYS = ("resolved_run_id", "resolved_at", "accepted_run_id", "accepted_reason", "accepted_at",
                "held_run_id", "held_at", "promoted_at", "promoted_reason")


def record_metadata(comparison: Comparison, s: ScorerComparison, seen: Seen, remembered: list[str],
                    chronic: list[str], before: IncidentMeta | None, details: Details,
                    shown: list[str], state: State = State.OPEN) -> IncidentMeta:
    """The metadata of an incident after this run (``before``: what it held; ``shown``: the cases
    its text lists, :func:`~evalloop.learning.incident_machine.shown_cases`; ``state``: its state
    after the run)."""
    run, now = comparison.run, now_of(comparison)
    old = before or IncidentMeta(baseline_score=s.baseline, current_score=s.current, drop_percentage=s.drop,
                                 text_scores=text_scores(seen), eval_run_id=run.id, runs_seen=0, first_seen=now)
    still = [c for c in remembered if c in seen.failing]
    dropped = CLOSING_KEYS if state is State.OPEN else CLOSING_KEYS[:5]
    return old.model_copy(update={
        **dict.fromkeys(dropped), "kind": KIND, "eval_name": run.suite, "eval_suite": run.suite, "scorer": s.scorer,
        "status": state.value, "latest_score": s.current, "latest_drop": s.drop, "last_run_id": run.id,
        "eval_run_ids": [*old.eval_run_ids, run.id][-MAX_RUNS:], "runs_seen": old.runs_seen + 1,
        "code_version": run.code_version, "last_seen": now, "timestamp": now, "pass_mark": seen.pass_mark,
        "failing_cases": remembered[:MAX_IDS], "failing_count": len(still), "chronic_cases": chronic[:MAX_IDS],
        "corrections": feedback.corrections(still[:MAX_IDS], details.cases) or list(old.corrections),
        "still_failing": shown[:MAX_IDS], "rewrite": False})


def view(record: MemoryRecord) -> Incident:
    """The state machine's view of a stored incident (without its runs: the history has those)."""
    m = meta(record) or IncidentMeta()
    return Incident(state=m.state, cause=Cause(m.cause) if m.cause in list(Cause) else Cause.REGRESSION,
                    remembered=list(m.failing_cases), chronic=list(m.chronic_cases), before=m.levels,
                    noise=m.noise or 0.0, window_runs=len(m.baseline_run_ids))


def since_run(record: MemoryRecord) -> str | None:
    """The run that opened (or last reopened) the incident: its evidence starts there."""
    m = meta(record) or IncidentMeta()
    return m.since_run_id or m.reopened_run_id or m.eval_run_id


def describe(record: MemoryRecord) -> str | None:
    """One line for an incident (None for any other memory): scorer, state, its cases, its chronic
    cases kept apart, how often it came back."""
    m = meta(record)
    if m is None:
        return None

    def listed(ids: Sequence[str]) -> str:
        return f"({len(ids)}) {', '.join(ids[:8])}{f' and {len(ids) - 8} more' if len(ids) > 8 else ''}" \
            if ids else "(0)"

    shown = m.state.label if m.status in list(State) else m.status
    cause = "floor" if m.cause == Cause.FLOOR else "regression"
    line = f"{m.scorer}: {shown}, runs seen {m.runs_seen}; {cause} cases {listed(m.failing_cases)}"
    if m.chronic_cases:
        line += f"; chronic, failing before it too {listed(m.chronic_cases)}"
    if m.reopened:
        line += f"; reopened {m.reopened}×"
    return line


def ids_only(record: MemoryRecord) -> str:
    """The ablation's poor relation: which cases fail, without what they were."""
    m = meta(record) or IncidentMeta(kind="")
    return (f'Eval "{m.eval_suite}" regression: {m.scorer}; '
            f"failing cases: {', '.join(m.failing_cases) or 'none recorded'}")


def lesson_text(record: MemoryRecord, detail: feedback.Detail = "full") -> str:
    """What a lesson says in a prompt: the record's text, or with ``detail="ids"`` its failing
    cases' ids alone (:func:`ids_only`)."""
    return record.information if detail == "full" else ids_only(record)


class LessonRecord(BaseModel):
    """An incident as a target's ``lesson_records`` parameter receives it (as a dict)."""

    id: str
    scorer: str | None
    text: str
    failing_cases: list[str]
    corrections: list[JsonObject]
    runs_seen: int | None
    last_seen: str | None


def lesson_record(record: MemoryRecord) -> LessonRecord:
    """A failure memory as a target reads it: id, scorer, text (untrusted data: the target fences
    it before it enters a prompt), the failing learn cases, their corrections, runs seen, last seen."""
    m = meta(record)
    return LessonRecord(id=record.id, scorer=m.scorer if m else None, text=record.information,
                        failing_cases=list(m.failing_cases) if m else [],
                        corrections=list(m.corrections) if m else [], runs_seen=m.runs_seen if m else None,
                        last_seen=m.last_seen if m else None)
