"""Deferred judges: a suite's ``llm_judge`` scorers grading in random batches until the verdict is settled.

With ``early_stop`` (a suite setting) the runner calls the target on every case as usual and
grades every other scorer at once, but keeps each answered case for its judges
(:meth:`DeferredJudges.defer`). Once every case has its output, the judges grade the cases in
``looks`` batches: the known-bad controls first (a broken judge must still be caught), then
the rest in an order drawn from the run's id. After each batch a :class:`StopRule` — the
verdicts' side, :class:`evalloop.verdicts.early_stop.SequentialStop`, which the pipeline gives
(the runner knows nothing of baselines) — says whether that judge's verdict is settled; a
settled judge grades no more cases. A case the target failed is graded at once, as always (no
judge call). The run's notes and a notice say how many cases each judge graded and how many calls
that saved.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from evalloop.llm.cache import current_epoch
from evalloop.llm.errors import BudgetExceeded
from evalloop.llm.usage import close_scope, open_scope
from evalloop.run.context import CaseContext
from evalloop.score import Score

if TYPE_CHECKING:
    from evalloop.history.models import Run
    from evalloop.run.bound import BoundScorer
    from evalloop.suites.models import Case


class Settled(Protocol):
    """What a look found: ``stop`` (None: go on) and a ``reason``."""

    @property
    def stop(self) -> str | None: ...

    @property
    def reason(self) -> str: ...


class StopRule(Protocol):
    """Whether a judge's verdict is settled after look ``k`` of ``looks``."""

    def settled(self, run: Run, scorer: str, policy: Mapping[str, Any], judged: Mapping[str, float],
                k: int, looks: int) -> Settled: ...


@dataclass
class _Item:
    row: int
    case: Case
    epoch: int
    output: Any


@dataclass
class _Judge:
    bound: BoundScorer
    graded: int = 0            # grades taken (case × epoch)
    values: dict[str, list[float]] = field(default_factory=dict)  # case → its epochs' usable scores
    stopped: tuple[int, str] | None = None  # (look, reason) once settled


class DeferredJudges:
    """The judges of one run whose grading waits for every output (see the module docstring)."""

    def __init__(self, judges: Sequence[BoundScorer], rule: StopRule, looks: int, seed: str) -> None:
        self.judges = [_Judge(b) for b in judges]
        self.names = frozenset(b.name for b in judges)
        self.rule, self.looks, self.seed = rule, looks, seed
        self.items: dict[int, list[_Item]] = {}  # case row → its epochs' outputs
        self.cases = 0

    def defer(self, row: int, case: Case, epoch: int, output: Any) -> None:
        """Keep one answered case (one epoch) for the judges."""
        self.items.setdefault(row, []).append(_Item(row, case, epoch, output))

    async def judge(self, state: Any, workers: Sequence[asyncio.Task[None]], concurrency: int) -> None:
        """Once ``workers`` are done (every output is in), grade in looks until settled."""
        await asyncio.gather(*workers)
        controls = [r for r, items in self.items.items()
                    if any(items[0].case.expects_fail(j.bound.name) for j in self.judges)]
        rest = sorted(set(self.items) - set(controls))
        random.Random(self.seed).shuffle(rest)
        order = sorted(controls) + rest
        self.cases = len(order)
        size = max(1, math.ceil(len(order) / self.looks))
        gate = asyncio.Semaphore(concurrency)
        usage, token = open_scope()
        try:
            for k in range(1, self.looks + 1):
                batch = [i for r in order[(k - 1) * size:k * size] for i in self.items[r]]
                active = [j for j in self.judges if j.stopped is None]
                if not batch or not active:
                    break
                try:
                    await asyncio.gather(*(self._grade(state, gate, j, i) for j in active for i in batch))
                except BudgetExceeded:
                    break
                finally:
                    state.count_usage(usage)
                for j in active:
                    judged = {c: sum(v) / len(v) for c, v in j.values.items() if v}
                    look = self.rule.settled(state.run, j.bound.name, j.bound.policy, judged, k, self.looks)
                    if look.stop is not None and k < self.looks:
                        j.stopped = (k, look.reason)
        finally:
            close_scope(token)

    async def _grade(self, state: Any, gate: asyncio.Semaphore, judge: _Judge, item: _Item) -> None:
        async with gate:
            current_epoch.set(item.epoch)  # this task's own copy of the context
            ctx = CaseContext(state.prepared.suite.name, state.run_id, item.case, item.epoch, state.services)
            graded = judge.bound.grade(item.case, item.output, ctx)
            score = graded if isinstance(graded, Score) else await graded
        control = item.case.expects_fail(judge.bound.name)
        judge.graded += 1
        if not (score.errored or score.skipped or control):
            judge.values.setdefault(item.case.id, []).append(score.value)
        state.record_score(item.row, item.case, item.epoch, judge.bound.name, score, control)

    def describe(self) -> tuple[dict[str, Any], list[str]]:
        """The run's notes on each judge (cases graded, calls saved, where it stopped) and the notices."""
        notes: dict[str, Any] = {}
        notices: list[str] = []
        grades = sum(len(items) for items in self.items.values())
        for j in self.judges:
            saved = grades - j.graded
            notes[j.bound.name] = {"graded": j.graded, "of": grades, "saved": saved,
                                   "look": j.stopped[0] if j.stopped else None, "looks": self.looks,
                                   "reason": j.stopped[1] if j.stopped else "every case graded"}
            if j.stopped:
                notices.append(f"early stop: {j.bound.name} graded {j.graded} of {grades} cases ({saved} judge "
                               f"calls saved): settled at look {j.stopped[0]} of {self.looks}, {j.stopped[1]}")
        return notes, notices
