"""Exit codes: one rule for what a finished run means to a shell, a CI job or a scheduler.

A run *fails* when its comparison does (:attr:`evalloop.verdicts.baseline.Comparison.fails`: a
regression, a broken scorer, an invalid run — which includes a run where every target call
failed). By default a failing run exits 1, like pytest and promptfoo; ``--no-fail-on-regression``
keeps the old behaviour (exit 0 whatever the verdict). The CLI's ``run``, the scheduler's
fires and the pytest plugin all read this module.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from evalloop.loop.pipeline import RunReport
    from evalloop.verdicts.baseline import Comparison

OK = 0
FAILED = 1
USAGE = 2
INTERRUPTED = 130
TERMINATED = 143


def run_fails(comparison: Comparison) -> bool:
    """Whether one run fails CI: a regression, a broken scorer, or an invalid run."""
    return comparison.fails


def exit_code(comparison: Comparison, *, fail_on_regression: bool = True) -> int:
    """The exit code of one run: 1 when it fails (unless the caller opted out), else 0."""
    return FAILED if fail_on_regression and run_fails(comparison) else OK


def exit_code_of(reports: Iterable[RunReport], *, fail_on_regression: bool = True) -> int:
    """The exit code of several runs: the worst of theirs."""
    return max((exit_code(r.comparison, fail_on_regression=fail_on_regression) for r in reports), default=OK)


def failure_lines(reports: Iterable[RunReport]) -> list[str]:
    """Why the runs fail, one line per kind (regression, broken scorer, invalid run)."""
    regressed, broken, invalid = [], [], []
    for r in reports:
        c = r.comparison
        if c.has_regression:
            regressed.append(r.suite.name)
        if c.broken:
            broken.append(r.suite.name)
        if c.invalid:
            reason = r.outcome.run.invalid_reason
            invalid.append(f"{r.suite.name} ({reason})" if reason else r.suite.name)
    lines = []
    for label, names in (("regression in", regressed), ("scorer broken in", broken),
                         ("invalid run in", invalid)):
        if names:
            lines.append(f"{label} {', '.join(names)}")
    return lines
