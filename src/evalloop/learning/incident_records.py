"""What an incident record says: its text, its metadata and its tags, built from one run.

This module owns the record's content and nothing that touches a store: the failure text (from
:mod:`evalloop.learning.feedback`; run ids, case ids and counts go in metadata, never in the
text), the metadata every reader uses (``status``, ``failing_cases``, ``chronic_cases``, runs
seen, …), the tags (``eval-failure``, ``suite:<name>``, ``scorer:<name>``, ``status:<state>``) and
the one line :func:`describe` shows for an incident. Held-out cases never reach any of it
(:func:`learn_only`). The state machine is :mod:`evalloop.learning.incident_machine`; the store
side is :mod:`evalloop.learning.incidents`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from evalloop.learning import feedback
from evalloop.learning.incident_machine import Seen, State
from evalloop.verdicts.baseline import Comparison, ScorerComparison, relative_drop

KIND = "eval-failure"
MAX_IDS = 50
MAX_RUNS = 20


def failure_tags(suite: str, scorer: str, status: str = "open") -> list[str]:
    """The tags of an incident of ``suite``'s ``scorer`` in ``status`` (what
    :func:`evalloop.learning.incidents.incidents` lists by)."""
    return [KIND, f"suite:{suite}", f"scorer:{scorer}", f"status:{status}"]


def meta_of(record: Any) -> Mapping[str, Any]:
    """A stored record's metadata (a search hit's record's, or the record's own; empty when none)."""
    return getattr(getattr(record, "record", record), "metadata", None) or {}


def now_of(comparison: Comparison) -> str:
    """When the run happened (its end, else its start), as the record's timestamps say it."""
    run = comparison.run
    return (run.ended_at or run.started_at or datetime.now(UTC)).isoformat()


@dataclass
class Details:
    """The failing cases' details a record's text and corrections are written from."""

    cases: Mapping[str, Any] = field(default_factory=dict)
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

    def keep(m: Mapping[str, Any]) -> dict[str, Any]:
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


def record_metadata(comparison: Comparison, s: ScorerComparison, seen: Seen, remembered: list[str],
                    chronic: list[str], before: Mapping[str, Any] | None, details: Details,
                    shown: list[str]) -> dict[str, Any]:
    """The metadata of an incident after this run (``before``: what it held; ``shown``: the cases
    its text lists, :func:`~evalloop.learning.incident_machine.shown_cases`)."""
    run, now = comparison.run, now_of(comparison)
    before = before or {}
    runs = [*(before.get("eval_run_ids") or []), run.id][-MAX_RUNS:]
    still = [c for c in remembered if c in seen.failing]
    return {
        **{k: v for k, v in before.items() if k not in ("resolved_run_id", "resolved_at", "accepted_run_id",
                                                         "accepted_reason", "accepted_at")},
        "kind": KIND, "eval_name": run.suite, "eval_suite": run.suite, "scorer": s.scorer, "status": State.OPEN.value,
        # the verdict's numbers when the text was written (set again only when the text is written again)
        "baseline_score": before.get("baseline_score", s.baseline),
        "current_score": before.get("current_score", s.current),
        "drop_percentage": before.get("drop_percentage", s.drop),
        "latest_score": s.current, "latest_drop": s.drop,  # this run's, whatever the text says
        "text_scores": before.get("text_scores", text_scores(seen)),  # the learn cases' scores the text says
        "eval_run_id": before.get("eval_run_id", run.id), "last_run_id": run.id, "eval_run_ids": runs,
        "runs_seen": int(before.get("runs_seen") or 0) + 1, "code_version": run.code_version,
        "first_seen": before.get("first_seen", now), "last_seen": now, "timestamp": now,
        "pass_mark": seen.pass_mark, "failing_cases": remembered[:MAX_IDS], "failing_count": len(still),
        "chronic_cases": chronic[:MAX_IDS],
        "corrections": feedback.corrections(still[:MAX_IDS], details.cases) or list(before.get("corrections") or []),
        "still_failing": shown[:MAX_IDS],
    }


def describe(record: Any) -> str | None:
    """One line for an incident (None for any other memory): scorer, state, its cases, its chronic
    cases kept apart, how often it came back."""
    meta = meta_of(record)
    if meta.get("kind") != KIND:
        return None

    def listed(ids: Sequence[str]) -> str:
        return f"({len(ids)}) {', '.join(ids[:8])}{f' and {len(ids) - 8} more' if len(ids) > 8 else ''}" \
            if ids else "(0)"

    line = (f"{meta.get('scorer')}: {meta.get('status')}, runs seen {meta.get('runs_seen', 1)}; "
            f"regression cases {listed(list(meta.get('failing_cases') or []))}")
    if meta.get("chronic_cases"):
        line += f"; chronic, failing before it too {listed(list(meta['chronic_cases']))}"
    if meta.get("reopened"):
        line += f"; reopened {meta['reopened']}×"
    return line
