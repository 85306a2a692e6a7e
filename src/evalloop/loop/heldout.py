"""The held-out part of a run: which of its cases the suite holds out (:attr:`Suite.holdout`,
never in a lesson), and what the run reports of them."""

from __future__ import annotations

from typing import Any

from evalloop.run.runner import ExecutedRun
from evalloop.suites.models import Suite


def held_out_part(suite: Suite, executed: ExecutedRun) -> tuple[set[str], dict[str, Any]]:
    """The run's held-out cases (:attr:`Suite.holdout`), and what the run reports of them: how many,
    and each scorer's mean over them beside the whole run's (controls and ungraded cases left out
    of both, as in the verdict)."""
    import numpy as np

    results = list(executed.results.values())
    ids = list(results[0].ids) if results else []
    held = suite.held_out_ids(ids)
    mask = np.fromiter((c in held for c in ids), dtype=bool, count=len(ids))
    means: dict[str, float | None] = {}
    for name, r in executed.results.items():
        values = r.scores.vector[mask]
        values = values[~np.isnan(values)]
        means[name] = float(values.mean()) if values.size else None
    return held, {"split": suite.holdout.describe(), "n": len(held), "of": len(ids), "means": means,
                  "whole": {name: r.mean for name, r in executed.results.items()},
                  "ids": [c for c in ids if c in held]}
