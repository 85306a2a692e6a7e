"""Case-level trend data: which cases flipped between two runs, which keep failing, and how an
output is shown to a reader.

A report's per-scorer chart says *how much* a score moved; this module says *which cases* a
reader should look at. :class:`CaseReader` reads (and caches) per-case scores and results of the
runs a report covers; :func:`case_fails` applies the one pass/fail rule
(:func:`evalloop.verdicts.outcome.passes`) to a case's score, for both the flips and the cases
that keep failing. A known-bad control that fails is doing its job: it is never listed as failing.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from typing import Any

from pydantic import BaseModel
from sqlalchemy import select

from evalloop.history.outputs import truncation_note
from evalloop.history.store import RESULTS, HistoryStore
from evalloop.verdicts.outcome import passes

MAX_CASES = 50
MAX_OUTPUT_CHARS = 300


class FlippedCase(BaseModel):
    """A case whose pass/fail changed between a run and the previous baseline-eligible run."""

    case_id: str
    before: float
    after: float
    message: str = ""
    output: str | None = None
    error: str | None = None


class FailingCase(BaseModel):
    """A case that fails in the latest run, and for how many runs in a row it has failed."""

    case_id: str
    value: float
    runs: int  # consecutive runs, the latest included, in which the case failed
    message: str = ""
    output: str | None = None
    error: str | None = None


def case_fails(value: float, pass_mark: float) -> bool:
    """Whether a case's score fails its scorer (below the pass mark): the one rule's comparison."""
    return not passes(value, pass_mark)


def shown_output(stored: str | None, limit: int = MAX_OUTPUT_CHARS) -> str | None:
    """A stored output as the target returned it: the history keeps outputs as JSON, so a text
    is shown as that text (not as a quoted, escaped JSON string) and anything else as JSON once."""
    if stored is None:
        return None
    try:
        value: Any = json.loads(stored)
    except ValueError:
        value = stored
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def shown_result_output(result: Any, limit: int = MAX_OUTPUT_CHARS) -> str | None:
    """A stored case result's output as :func:`shown_output` gives it, and when the history kept
    only its beginning, the line that says so (:mod:`evalloop.history.outputs`)."""
    shown = shown_output(result.output, limit)
    truncated = truncation_note(result.output, getattr(result, "output_bytes", None),
                                getattr(result, "output_sha256", None))
    return shown if truncated is None or shown is None else f"{shown} [{truncated}]"


class CaseReader:
    """Per-case reads, cached: scores per (run, scorer) and results per run."""

    def __init__(self, store: HistoryStore) -> None:
        self.store = store
        self._scores: dict[tuple[str, str], dict[str, float]] = {}
        self._results: dict[str, dict[str, Any]] = {}

    def scores(self, run_id: str, scorer: str) -> dict[str, float]:
        key = (run_id, scorer)
        if key not in self._scores:
            self._scores[key] = self.store.case_scores(run_id, scorer)
        return self._scores[key]

    def results(self, run_id: str, case_ids: Collection[str]) -> dict[str, Any]:
        """The stored result of each of ``case_ids`` in a run (its last epoch's): only their rows
        are read (a report names at most :data:`MAX_CASES` cases of a run of any size)."""
        kept = self._results.setdefault(run_id, {})
        missing = sorted(set(case_ids) - kept.keys())
        with self.store.engine.connect() as conn:
            for start in range(0, len(missing), 250):
                for row in conn.execute(select(RESULTS).where(RESULTS.c.run_id == run_id,
                                                              RESULTS.c.case_id.in_(missing[start:start + 250]))
                                        .order_by(RESULTS.c.id)):
                    kept[row.case_id] = row
        return {c: kept[c] for c in case_ids if c in kept}

    def latencies(self, run_id: str) -> list[float]:
        """Every case result's latency in a run (each epoch), sorted: one column read."""
        with self.store.engine.connect() as conn:
            return sorted(conn.execute(select(RESULTS.c.latency_ms).where(RESULTS.c.run_id == run_id)).scalars())

    def flips(self, run_id: str, previous_id: str, scorer: str,
              pass_mark: float) -> tuple[list[FlippedCase], list[FlippedCase]]:
        now, before = self.scores(run_id, scorer), self.scores(previous_id, scorer)
        common = sorted(set(now) & set(before))
        failing = [c for c in common if case_fails(now[c], pass_mark) and not case_fails(before[c], pass_mark)]
        passing = [c for c in common if case_fails(before[c], pass_mark) and not case_fails(now[c], pass_mark)]
        failing, passing = failing[:MAX_CASES], passing[:MAX_CASES]
        messages = self.store.case_messages(run_id, scorer, failing + passing)
        outputs = self.results(run_id, failing) if failing else {}

        def flipped(case_id: str, with_output: bool) -> FlippedCase:
            result = outputs.get(case_id) if with_output else None
            return FlippedCase(
                case_id=case_id, before=before[case_id], after=now[case_id],
                message=messages.get(case_id, ""),
                output=shown_result_output(result) if result is not None else None,
                error=result.error if result is not None else None,
            )

        return [flipped(c, True) for c in failing], [flipped(c, False) for c in passing]

    def failing(self, run_ids: Sequence[str], scorer: str, pass_mark: float,
                controls: Collection[str] = ()) -> list[FailingCase]:
        """The cases that fail in the last of ``run_ids`` (oldest first), longest failing first,
        each with the number of runs in a row it has failed, its message and its output; known-bad
        ``controls`` are left out (they fail by design)."""
        if not run_ids:
            return []
        latest = self.scores(run_ids[-1], scorer)
        skip = set(controls)
        streak = {c: 1 for c, v in latest.items() if case_fails(v, pass_mark) and c not in skip}
        open_ = set(streak)
        for run_id in reversed(run_ids[:-1]):
            scores = self.scores(run_id, scorer)
            open_ = {c for c in open_ if c in scores and case_fails(scores[c], pass_mark)}
            if not open_:
                break
            for c in open_:
                streak[c] += 1
        chosen = sorted(streak, key=lambda c: (-streak[c], c))[:MAX_CASES]
        messages = self.store.case_messages(run_ids[-1], scorer, chosen)
        results = self.results(run_ids[-1], chosen)
        return [FailingCase(case_id=c, value=latest[c], runs=streak[c], message=messages.get(c, ""),
                            output=shown_result_output(results[c]) if c in results else None,
                            error=results[c].error if c in results else None)
                for c in chosen]
