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
from evalloop.learning.incident_machine import Cause, Incident, Level, Seen, State
from evalloop.verdicts.baseline import Comparison, ScorerComparison

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


def learn_only(details: Details) -> Details:
    """The details without any held-out case: no held-out case is remembered, shown or corrected."""
    held = details.held_out
    if not held:
        return details

    def keep(m: Mapping[str, Any]) -> dict[str, Any]:
        return {c: v for c, v in m.items() if c not in held}

    return Details(keep(details.cases), keep(details.outputs), {s: keep(m) for s, m in details.scores.items()},
                   {s: keep(m) for s, m in details.reasons.items()}, details.baseline, held)


def record_text(comparison: Comparison, s: ScorerComparison, seen: Seen, shown: list[str],
                details: Details) -> str:
    """The incident's text: the scorer's numbers and the ``shown`` cases with their details."""
    every = feedback.failing_cases(shown[:MAX_IDS], details.cases, details.outputs,
                                   details.reasons.get(s.scorer, {}))
    ev = s.evidence
    return feedback.information(feedback.Incident(
        suite=comparison.run.suite, scorer=s.scorer, kind=s.kind, current=s.current, baseline=s.baseline,
        window_runs=s.window_runs, drop=s.drop, p_value=ev.p_value if ev else None,
        n_paired=ev.n_paired if ev else None, graded=len(seen.scores),
        passed=len(seen.scores) - len(seen.failing), newly_failing=len(s.newly_failing),
        newly_passing=len(s.newly_passing), failing=every[: feedback.MAX_CASES], failing_total=len(shown),
        patterns=feedback.common_patterns(every)))


#: what a closed or held record says about how it left ``open``; dropped when it is open again
CLOSING_KEYS = ("resolved_run_id", "resolved_at", "accepted_run_id", "accepted_reason", "accepted_at",
                "held_run_id", "held_at", "promoted_at", "promoted_reason")


def record_metadata(comparison: Comparison, s: ScorerComparison, seen: Seen, remembered: list[str],
                    chronic: list[str], before: Mapping[str, Any] | None, details: Details,
                    shown: list[str], state: State = State.OPEN) -> dict[str, Any]:
    """The metadata of an incident after this run (``before``: what it held; ``shown``: the cases
    its text lists, :func:`~evalloop.learning.incident_machine.shown_cases`; ``state``: its state
    after the run)."""
    run, now = comparison.run, now_of(comparison)
    before = before or {}
    runs = [*(before.get("eval_run_ids") or []), run.id][-MAX_RUNS:]
    still = [c for c in remembered if c in seen.failing]
    kept = CLOSING_KEYS if state is State.OPEN else CLOSING_KEYS[:5]
    return {
        **{k: v for k, v in before.items() if k not in kept},
        "kind": KIND, "eval_name": run.suite, "eval_suite": run.suite, "scorer": s.scorer, "status": state.value,
        # the numbers the memory's text says (set again only when the text is written again)
        "baseline_score": before.get("baseline_score", s.baseline),
        "current_score": before.get("current_score", s.current),
        "drop_percentage": before.get("drop_percentage", s.drop),
        "latest_score": s.current, "latest_drop": s.drop,  # this run's, whatever the text says
        "eval_run_id": before.get("eval_run_id", run.id), "last_run_id": run.id, "eval_run_ids": runs,
        "runs_seen": int(before.get("runs_seen") or 0) + 1, "code_version": run.code_version,
        "first_seen": before.get("first_seen", now), "last_seen": now, "timestamp": now,
        "pass_mark": seen.pass_mark, "failing_cases": remembered[:MAX_IDS], "failing_count": len(still),
        "chronic_cases": chronic[:MAX_IDS],
        "corrections": feedback.corrections(still[:MAX_IDS], details.cases) or list(before.get("corrections") or []),
        "still_failing": shown[:MAX_IDS],
    }


def level_fields(levels: Mapping[str, Level], noise: float | None = None,
                 window: list[str] | None = None) -> dict[str, Any]:
    """What an incident stores of its cases before it: each case's mean, pass rate and runs in the
    baseline window (``levels_before``), one grade's noise there, and the window's runs."""
    out: dict[str, Any] = {"levels_before": {c: [round(v.mean, 6), round(v.passed, 6), v.runs]
                                             for c, v in levels.items()}}
    if noise is not None:
        out["noise"] = round(noise, 6)
    if window is not None:
        out["baseline_run_ids"] = list(window)
    return out


def view(record: Any) -> Incident:
    """The state machine's view of a stored incident (without its runs: the history has those)."""
    meta = meta_of(record)
    levels = {}
    for case, value in (meta.get("levels_before") or {}).items():
        if isinstance(value, list) and len(value) == 3:
            levels[str(case)] = Level(float(value[0]), float(value[1]), int(value[2]))
    return Incident(state=State(meta.get("status") or State.OPEN), cause=Cause(meta.get("cause") or Cause.REGRESSION),
                    remembered=list(meta.get("failing_cases") or []), chronic=list(meta.get("chronic_cases") or []),
                    before=levels, noise=float(meta.get("noise") or 0.0),
                    window_runs=len(meta.get("baseline_run_ids") or []))


def since_run(record: Any) -> str | None:
    """The run that opened (or last reopened) the incident: its evidence starts there."""
    meta = meta_of(record)
    return meta.get("since_run_id") or meta.get("reopened_run_id") or meta.get("eval_run_id")


def describe(record: Any) -> str | None:
    """One line for an incident (None for any other memory): scorer, state, its cases, its chronic
    cases kept apart, how often it came back."""
    meta = meta_of(record)
    if meta.get("kind") != KIND:
        return None

    def listed(ids: Sequence[str]) -> str:
        return f"({len(ids)}) {', '.join(ids[:8])}{f' and {len(ids) - 8} more' if len(ids) > 8 else ''}" \
            if ids else "(0)"

    status = meta.get("status")
    shown = State(status).label if status in list(State) else status
    cause = "floor" if meta.get("cause") == Cause.FLOOR else "regression"
    line = (f"{meta.get('scorer')}: {shown}, runs seen {meta.get('runs_seen', 1)}; "
            f"{cause} cases {listed(list(meta.get('failing_cases') or []))}")
    if meta.get("chronic_cases"):
        line += f"; chronic, failing before it too {listed(list(meta['chronic_cases']))}"
    if meta.get("reopened"):
        line += f"; reopened {meta['reopened']}×"
    return line
