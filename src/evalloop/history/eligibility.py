"""Which stored runs may serve as a baseline, and what makes two runs' systems differ.

The single definition of baseline eligibility: verdicts (``HistoryStore.baseline_runs``),
reports and trends all ask :func:`baseline_eligible`. A scorer of a run is eligible when the
run completed, is valid, ran every case (not ``--limit``), the scorer graded at least one case
with a finite mean, and it did not pass a known-bad control (``scorer broken``). The answer is
stored on the summary when the run is judged; rows from older versions are judged here.
"""

from __future__ import annotations

import json
import math
from typing import Any

from evalloop.history.models import Run, RunStatus, ScorerSummary

# parts of a fingerprint that change without the system under test changing
VOLATILE_KEYS = frozenset({"cases", "injected"})


def eligible_now(run: Run, summary: ScorerSummary, verdict: str | None) -> bool:
    """Whether a judged scorer of a finished run may serve as a later run's baseline."""
    return (run.status == RunStatus.COMPLETED and bool(run.valid) and not run.partial
            and not summary.skipped and summary.n > 0 and summary.mean is not None
            and math.isfinite(summary.mean) and verdict != "scorer broken")


def baseline_eligible(run: Run, summary: ScorerSummary | None) -> bool:
    """The one answer to "may this scorer of this run be part of a baseline?"."""
    if summary is None or run.status != RunStatus.COMPLETED:
        return False
    if summary.eligible is not None:
        return bool(summary.eligible) and bool(run.valid)
    return eligible_now(run, summary, summary.verdict)


def base_fingerprint(fingerprint: dict[str, Any]) -> dict[str, Any]:
    """The fingerprint without its volatile parts (case files, injected failure memories)."""

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in VOLATILE_KEYS}
        return value

    return strip(fingerprint)


def fingerprint_changes(before: str | None, after: str | None) -> list[str]:
    """The top-level parts (target, its params, its prompt/model, scorers) that differ."""
    try:
        a = base_fingerprint(json.loads(before or "{}"))
        b = base_fingerprint(json.loads(after or "{}"))
    except ValueError:
        return []
    changed = []
    for key in sorted(set(a) | set(b)):
        if a.get(key) == b.get(key):
            continue
        if isinstance(a.get(key), dict) and isinstance(b.get(key), dict):
            inner = sorted(k for k in set(a[key]) | set(b[key]) if a[key].get(k) != b[key].get(k))
            changed += [f"{key}.{k}" for k in inner]
        else:
            changed.append(key)
    return changed
