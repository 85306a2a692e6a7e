"""Exit codes: what a finished run means to a shell, a CI job or a scheduler.

A run *fails* by the one rule of :func:`evalloop.verdicts.outcome.run_outcome` (a regression, a
scorer under its floor, a broken scorer, an invalid run). By default a failing run exits 1, like
pytest and promptfoo; ``--no-fail-on-regression`` keeps exit 0 whatever the verdict. The CLI's
``run``, the scheduler's fires and the pytest plugin all read this module.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from evalloop.verdicts.outcome import ORDER, failure_name, run_outcome
from evalloop.verdicts.verdict import VerdictStatus

if TYPE_CHECKING:
    from evalloop.loop.pipeline import RunReport
    from evalloop.verdicts.baseline import Comparison

OK = 0
FAILED = 1
USAGE = 2
INTERRUPTED = 130
TERMINATED = 143


def run_fails(comparison: Comparison) -> bool:
    """Whether one run fails CI."""
    return run_outcome(comparison).fails


def exit_code(comparison: Comparison, *, fail_on_regression: bool = True) -> int:
    """The exit code of one run: 1 when it fails (unless the caller opted out), else 0."""
    return FAILED if fail_on_regression and comparison.fails else OK


def exit_code_of(reports: Iterable[RunReport], *, fail_on_regression: bool = True) -> int:
    """The exit code of several runs: the worst of theirs."""
    return max((exit_code(r.comparison, fail_on_regression=fail_on_regression) for r in reports), default=OK)


def failure_lines(reports: Iterable[RunReport]) -> list[str]:
    """Why the runs fail, one line per failing label, worst first (the one order,
    :data:`evalloop.verdicts.outcome.ORDER`)."""
    named: dict[VerdictStatus, list[str]] = {status: [] for status in ORDER if status.fails}
    for r in reports:
        c = r.comparison
        present = {s.status for s in c.scorers}
        if c.invalid:
            reason = r.executed.run.invalid_reason
            named[VerdictStatus.INVALID].append(f"{r.suite.name} ({reason})" if reason else r.suite.name)
        for status in named:
            if status is not VerdictStatus.INVALID and status in present:
                named[status].append(r.suite.name)
    return [f"{failure_name(s)} in {', '.join(names)}" for s, names in named.items() if names]
