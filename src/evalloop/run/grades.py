"""One scorer's grades in one run: gathered per case while the run goes, then summed up once.

Grades are kept as two arrays indexed by the case's position (sums and counts, 16 bytes per
case), averaged over epochs at the end into a score vector aligned to the run's case ids
(:mod:`evalloop.scoring.scorevec`). :class:`ScorerResult` is the single source of a scorer's mean, n and
validity that verdicts, history, reports, the run log and JUnit read.
"""

from __future__ import annotations

import functools
import math
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from evalloop.score import Score, passes

if TYPE_CHECKING:
    from evalloop.history.models import ScorerSummary
    from evalloop.run.bound import BoundScorer
    from evalloop.scoring.scorevec import CaseScores


@dataclass
class ScorerResult:
    """One scorer of one run, computed once: the single source of its mean, n and validity.

    ``vector`` holds each case's score averaged over its epochs, in case order, aligned to
    ``ids`` (NaN where a case has no grade: errored, skipped); known-bad control cases are in it
    too, and held apart in ``controls``; ``scorer_controls`` are those of them with a fixed output,
    the only ones that test the scorer (the others are expected failures of the product).
    ``scores`` is a case → score view without the controls.
    ``mean`` is the mean over the cases, ``n`` the number of cases, ``grades`` the number of
    grades taken (cases × epochs). Verdicts, history, reports, the run log and JUnit all read
    these numbers.
    """

    scorer: str
    kind: str
    threshold: float
    pass_mark: float
    policy: dict[str, Any]
    binary: bool | None = None
    ids: Sequence[str] = ()
    vector: Any = None  # numpy float64 array aligned to ids
    controls: dict[str, float] = field(default_factory=dict)
    scorer_controls: list[str] = field(default_factory=list)
    errored_ids: list[str] = field(default_factory=list)
    grades: int = 0
    errored: int = 0
    skipped: int = 0
    skip_message: str = ""
    first_error: str = ""
    invalid: str | None = None

    @functools.cached_property
    def _graded(self) -> Any:
        """The vector without the control cases."""
        import numpy as np

        values = np.array(self.vector if self.vector is not None else [], dtype=np.float64)
        if self.controls:
            rows = [i for i, case_id in enumerate(self.ids) if case_id in self.controls]
            values[rows] = np.nan
        return values

    @property
    def scores(self) -> CaseScores:
        from evalloop.scoring.scorevec import CaseScores

        return CaseScores(self.ids, self._graded)

    @functools.cached_property
    def n(self) -> int:
        import numpy as np

        return int(np.count_nonzero(~np.isnan(self._graded)))

    @functools.cached_property
    def mean(self) -> float | None:
        import numpy as np

        values = self._graded[~np.isnan(self._graded)]
        return math.fsum(values.tolist()) / len(values) if len(values) else None

    @property
    def controls_passed(self) -> list[str]:
        """The negative controls that test the scorer (a fixed output) and passed: the scorer is broken."""
        tests = set(self.scorer_controls)
        return sorted(c for c, v in self.controls.items() if c in tests and passes(v, self.pass_mark))

    @property
    def expected_failures_passed(self) -> list[str]:
        """The known-bad cases that ran through the target and passed: the product's answer to them
        changed (an expected failure of the product that did not fail), never the scorer's fault."""
        tests = set(self.scorer_controls)
        return sorted(c for c, v in self.controls.items() if c not in tests and passes(v, self.pass_mark))

    def summary(self, run_id: str, measurement: str | None = None) -> ScorerSummary:
        """The stored summary of this scorer in run ``run_id`` (measured as ``measurement`` says)."""
        from evalloop.history.details import jsonable
        from evalloop.history.models import ScorerSummary

        return ScorerSummary(run_id=run_id, scorer=self.scorer, kind=self.kind, mean=self.mean, n=self.n,
                             errored=self.errored, skipped=self.n == 0 and not self.controls and self.skipped > 0,
                             threshold=self.threshold, details=jsonable(self.details()),
                             measurement=measurement)

    def details(self) -> dict[str, Any]:
        """What the stored summary keeps beside its columns."""
        return {"pass_mark": self.pass_mark, "skip": self.skip_message, "first_error": self.first_error,
                "controls": sorted(self.controls), "scorer_controls": self.scorer_controls,
                "controls_passed": self.controls_passed,
                "expected_failures_passed": self.expected_failures_passed,
                "policy": self.policy, "binary": self.binary, "invalid": self.invalid,
                "grades": self.grades}


class _Grades:
    """One scorer's grades while a run goes: per-case sums and counts in two arrays indexed by
    the case's position (epochs are averaged at the end), so memory is 16 bytes per case."""

    __slots__ = ("sums", "counts", "control_rows", "scorer_control_rows", "errored_rows", "grades", "errored",
                 "skipped", "skip_message", "first_error")

    def __init__(self, n_cases: int) -> None:
        self.sums = array("d", bytes(8 * n_cases))
        self.counts = array("d", bytes(8 * n_cases))
        self.control_rows: set[int] = set()
        self.scorer_control_rows: set[int] = set()  # controls with a fixed output: they test the scorer
        self.errored_rows: set[int] = set()
        self.grades = self.errored = self.skipped = 0
        self.skip_message = self.first_error = ""

    def add(self, row: int, score: Score, control: bool, tests_scorer: bool = False) -> None:
        if score.skipped:
            self.skipped += 1
            self.skip_message = self.skip_message or score.message
            return
        self.grades += 1
        if score.errored:
            self.errored += 1
            self.errored_rows.add(row)
            self.first_error = self.first_error or score.message
            return
        if control:
            self.control_rows.add(row)
            if tests_scorer:
                self.scorer_control_rows.add(row)
        self.sums[row] += score.value
        self.counts[row] += 1

    def result(self, bound: BoundScorer, errored_limit: float, ids: Sequence[str]) -> ScorerResult:
        import numpy as np

        invalid = None
        if self.grades and self.errored / self.grades > errored_limit:
            invalid = (f"{bound.name}: {self.errored}/{self.grades} grades errored "
                       f"(limit {errored_limit:.0%})")
        counts = np.frombuffer(self.counts, dtype=np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            vector = np.where(counts > 0, np.frombuffer(self.sums, dtype=np.float64) / counts, np.nan)
        return ScorerResult(
            scorer=bound.name, kind=bound.kind.value, threshold=bound.threshold,
            pass_mark=bound.pass_mark, policy=bound.policy, binary=bound.spec.binary or None,
            ids=ids, vector=vector,
            controls={ids[r]: float(vector[r]) for r in sorted(self.control_rows)},
            scorer_controls=sorted(ids[r] for r in self.scorer_control_rows),
            errored_ids=[ids[r] for r in sorted(self.errored_rows) if counts[r] == 0],
            grades=self.grades, errored=self.errored, skipped=self.skipped,
            skip_message=self.skip_message, first_error=self.first_error, invalid=invalid,
        )
