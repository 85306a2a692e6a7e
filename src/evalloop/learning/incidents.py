"""The learning step: failure memories with a lifecycle, found again for the next prompt.

One **incident** per (suite, scorer): the first regression opens a memory (text from
:mod:`evalloop.learning.feedback`, tags ``eval-failure``, ``suite:<name>``, ``scorer:<name>``,
``status:open``; the run ids in metadata, never in the text). A later run whose cases still fail
updates that memory (runs seen, last run, cases failing now) instead of adding one; a run in
which its cases pass again resolves it (``status:resolved``: kept for history, never injected).
The incident is matched by metadata (``eval_suite``, ``scorer``, ``status``), so no suite name
can collide with a tag. A failing store never fails the run: it is reported.

:func:`failure_patterns` chooses what enters a prompt: this suite's open incidents, newest
first — looked up by metadata, not by similarity.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel

from evalloop.config import Settings
from evalloop.errors import ConfigError, EvalloopError
from evalloop.learning import feedback
from evalloop.verdicts.baseline import Comparison, ScorerComparison
from evalloop.verdicts.verdict import VerdictStatus

PATTERN_LIMIT = 3
HEADING = "Past failure patterns:"
KIND = "eval-failure"
MAX_IDS = 50
MAX_RUNS = 20


class Learned(BaseModel):
    """What the learning step did for one scorer: ``opened``, ``updated`` or ``resolved``."""

    scorer: str
    action: str = "opened"
    memory_id: str | None = None
    error: str | None = None


def failure_tags(suite: str, scorer: str, status: str = "open") -> list[str]:
    return [KIND, f"suite:{suite}", f"scorer:{scorer}", f"status:{status}"]


def _meta(record: Any) -> Mapping[str, Any]:
    return getattr(getattr(record, "record", record), "metadata", None) or {}


def incidents(adapter: Any, suite: str, scorer: str | None = None, status: str | None = "open",
              limit: int = 200) -> list[Any]:
    """Failure memories of ``suite`` (and ``scorer``) with ``status``, newest first, by metadata."""
    tags = [KIND, f"suite:{suite}"] + ([f"status:{status}"] if status else [])
    found = []
    for record in adapter.list(tags=tags, limit=limit):
        meta = _meta(record)
        if meta.get("kind") != KIND or meta.get("eval_suite") != suite:
            continue
        if (scorer is not None and meta.get("scorer") != scorer) or (status and meta.get("status") != status):
            continue
        found.append(record)
    return sorted(found, key=lambda r: str(_meta(r).get("last_seen") or ""), reverse=True)


def _now(comparison: Comparison) -> str:
    run = comparison.run
    return (run.ended_at or run.started_at or datetime.now(UTC)).isoformat()


def _incident(comparison: Comparison, s: ScorerComparison, scores: Mapping[str, float], pass_mark: float,
              cases: Mapping[str, Any], outputs: Mapping[str, str | None],
              reasons: Mapping[str, str]) -> tuple[feedback.Incident, list[str]]:
    failing = sorted(c for c, v in scores.items() if v < pass_mark)
    newly = [c for c, _ in s.newly_failing]
    ordered = [c for c in newly if c in failing] + [c for c in failing if c not in newly]
    every = feedback.failing_cases(ordered[:MAX_IDS], cases, outputs, reasons)
    shown = every[: feedback.MAX_CASES]
    ev = s.evidence
    inc = feedback.Incident(
        suite=comparison.run.suite, scorer=s.scorer, kind=s.kind, current=s.current, baseline=s.baseline,
        window_runs=s.window_runs, drop=s.drop, p_value=ev.p_value if ev else None,
        n_paired=ev.n_paired if ev else None, graded=len(scores),
        passed=sum(1 for v in scores.values() if v >= pass_mark), newly_failing=len(s.newly_failing),
        newly_passing=len(s.newly_passing), failing=shown, failing_total=len(failing),
        patterns=feedback.common_patterns(every))
    return inc, ordered


def _metadata(comparison: Comparison, s: ScorerComparison, failing: list[str], status: str,
              before: Mapping[str, Any] | None, cases: Mapping[str, Any]) -> dict[str, Any]:
    run, now = comparison.run, _now(comparison)
    before = before or {}
    runs = [*(before.get("eval_run_ids") or []), run.id][-MAX_RUNS:]
    return {
        "kind": KIND, "eval_name": run.suite, "eval_suite": run.suite, "scorer": s.scorer, "status": status,
        "baseline_score": before.get("baseline_score", s.baseline), "current_score": s.current,
        "drop_percentage": s.drop if s.drop is not None else before.get("drop_percentage"),
        "eval_run_id": before.get("eval_run_id", run.id), "last_run_id": run.id, "eval_run_ids": runs,
        "runs_seen": int(before.get("runs_seen") or 0) + 1, "code_version": run.code_version,
        "first_seen": before.get("first_seen", now), "last_seen": now, "timestamp": now,
        "failing_cases": failing[:MAX_IDS], "failing_count": len(failing),
        "corrections": feedback.corrections(failing[:MAX_IDS], cases) or list(before.get("corrections") or []),
    }


def learn(comparison: Comparison, adapter: Any, *, cases: Mapping[str, Any] | None = None,
          outputs: Mapping[str, str | None] | None = None,
          scores: Mapping[str, Mapping[str, float]] | None = None,
          reasons: Mapping[str, Mapping[str, str]] | None = None) -> list[Learned]:
    """Open, update or resolve this run's incidents; failures are returned, not raised.

    ``cases`` (id → case), ``outputs`` (id → output text), ``scores`` (scorer → id → score)
    and ``reasons`` (scorer → id → message) give the failing cases their details.
    """
    if comparison.invalid:
        return []
    results = []
    for s in comparison.scorers:
        if s.status in (VerdictStatus.SKIPPED, VerdictStatus.INVALID, VerdictStatus.SCORER_BROKEN):
            continue
        try:
            item = _learn_one(comparison, s, adapter, cases or {}, outputs or {},
                              (scores or {}).get(s.scorer, {}), (reasons or {}).get(s.scorer, {}))
        except Exception as exc:  # noqa: BLE001 - a memory service failure never fails the run
            text = exc.one_line() if isinstance(exc, EvalloopError) else f"{type(exc).__name__}: {exc}"
            item = Learned(scorer=s.scorer, action="failed", error=text)
        if item is not None:
            results.append(item)
    return results


def _learn_one(comparison: Comparison, s: ScorerComparison, adapter: Any, cases: Mapping[str, Any],
               outputs: Mapping[str, str | None], scores: Mapping[str, float],
               reasons: Mapping[str, str]) -> Learned | None:
    suite, pass_mark = comparison.run.suite, 0.5
    if s.evidence is not None and getattr(s.evidence, "pass_mark", None) is not None:
        pass_mark = s.evidence.pass_mark
    open_ = incidents(adapter, suite, s.scorer)
    if not s.is_regression and not open_:
        return None
    inc, failing = _incident(comparison, s, scores, pass_mark, cases, outputs, reasons)
    current = open_[0] if open_ else None
    if current is None:
        memory_id = adapter.store(feedback.information(inc), tags=failure_tags(suite, s.scorer),
                                  metadata=_metadata(comparison, s, failing, "open", None, cases))
        return Learned(scorer=s.scorer, action="opened", memory_id=memory_id)
    record = getattr(current, "record", current)
    before = dict(record.metadata)
    remembered = [c for c in before.get("failing_cases") or [] if c in scores]
    still = [c for c in remembered if scores[c] < pass_mark]
    if not s.is_regression and not still:  # its cases pass again: resolved, kept for history
        meta = {**before, "status": "resolved", "resolved_run_id": comparison.run.id, "resolved_at": _now(comparison)}
        adapter.update(record.id, record.information, tags=failure_tags(suite, s.scorer, "resolved"), metadata=meta)
        return Learned(scorer=s.scorer, action="resolved", memory_id=record.id)
    if not s.is_regression and s.status is VerdictStatus.IMPROVED:
        return None  # getting better but not there yet: the incident stays as it was
    unchanged = not failing or sorted(failing[:MAX_IDS]) == sorted(before.get("failing_cases") or [])
    text = record.information if unchanged else feedback.information(inc)  # an unchanged failure: touched
    adapter.update(record.id, text, tags=failure_tags(suite, s.scorer),
                   metadata=_metadata(comparison, s, failing or list(before.get("failing_cases") or []),
                                      "open", before, cases))
    return Learned(scorer=s.scorer, action="updated", memory_id=record.id)


def open_adapter(settings: Settings) -> Any:
    """The memory adapter the settings name: the embedded store, or an HTTP memory service."""
    if settings.memory_url:
        from evalloop.memory.adapters import HTTPMemoryAdapter, HTTPMemoryConfig

        return HTTPMemoryAdapter(HTTPMemoryConfig(base_url=settings.memory_url, **settings.memory_http))
    from evalloop.memory.store import MemoryStore

    return MemoryStore(settings.memory_file)  # a damaged file: one StoreError line naming it


def close_adapter(adapter: Any) -> None:
    close = getattr(adapter, "close", None)
    if close is not None:
        close()


def failure_patterns(adapter: Any, suite: str, query: str | None = None, limit: int = PATTERN_LIMIT) -> list[Any]:
    """The suite's open failure memories, newest first (``query`` is kept for compatibility:
    the question "what is open for this suite" is answered by metadata, not by similarity)."""
    del query
    return incidents(adapter, suite)[:limit]


def enhance_prompt(base: str, patterns: Sequence[Any], *, budget: int = 6000, per_memory: int = 2400,
                   detail: feedback.Detail = "full") -> str:
    """``base`` with the fenced, capped failure patterns (unchanged when there are none)."""
    records = [getattr(p, "record", p) for p in patterns]
    section = feedback.injection(records, budget=budget, per_memory=per_memory, detail=detail)
    return base if not section else f"{base.rstrip()}\n\n{section}\n"


class Injected(BaseModel):
    """What the next run's prompts get: the fenced text, and which memories it came from."""

    text: str | None = None
    memory_ids: list[str] = []
    records: list[Any] = []


def injected_for(settings: Settings, suite: str) -> tuple[Injected, str | None]:
    """The suite's injection under the settings' budget, and a notice if memories could not be read."""
    try:
        adapter = open_adapter(settings)
    except (EvalloopError, OSError) as exc:
        return Injected(), f"failure memories not read: {exc}"
    try:
        found = [getattr(f, "record", f) for f in failure_patterns(adapter, suite, limit=settings.inject_limit)]
    except Exception as exc:  # noqa: BLE001 - prompts still work without past failures
        text = exc.one_line() if isinstance(exc, EvalloopError) else str(exc)
        return Injected(), f"failure memories not read: {text}"
    finally:
        close_adapter(adapter)
    text = feedback.injection(found, budget=settings.inject_budget, per_memory=settings.inject_per_memory,
                              detail=settings.inject_detail)
    if settings.inject_detail == "ids":  # a target reading memories directly gets no more than the text
        found = [r.model_copy(update={"metadata": {k: v for k, v in r.metadata.items() if k != "corrections"}})
                 for r in found]
    return Injected(text=text, memory_ids=[r.id for r in found] if text else [], records=found if text else []), None


def patterns_text(settings: Settings, suite: str, limit: int = PATTERN_LIMIT) -> tuple[str | None, str | None]:
    """The fenced failure-pattern text for a suite's prompts, and a notice if memories could not be read."""
    injected, notice = injected_for(settings.model_copy(update={"inject_limit": limit}), suite)
    return injected.text, notice


def require_memories(settings: Settings) -> None:
    """Raise when the embedded memory file does not exist yet (nothing was ever learned)."""
    if not settings.memory_url and not settings.memory_file.exists():
        raise ConfigError("no memory store yet", where=str(settings.memory_file),
                          hint="memories are written when a run regresses; see `evalloop run --help`")
