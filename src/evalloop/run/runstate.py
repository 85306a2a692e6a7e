"""One run in progress: its cases called and graded (by the workers :func:`evalloop.run.runner.execute`
starts), their rows written to history in batches, and the run finished into an :class:`ExecutedRun`.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from evalloop.errors import EvalloopError
from evalloop.history.details import json_object, jsonable
from evalloop.history.models import Run, RunStatus, ScorerSummary, ScoreVector, utcnow
from evalloop.history.outputs import cap_output
from evalloop.history.store import HistoryStore, dumps
from evalloop.llm.budget import Budget
from evalloop.llm.cache import current_epoch as _EPOCH
from evalloop.llm.errors import BudgetExceeded
from evalloop.llm.errors import is_case_level as _is_case_level
from evalloop.llm.usage import RUN_TOTALS, UsageTotals, close_scope, open_scope
from evalloop.redact import redact_text
from evalloop.run.calling import is_awaitable, traceback_of
from evalloop.run.context import CaseContext, Services
from evalloop.run.failures import Failure, TargetTimeout, classify
from evalloop.run.grades import ScorerResult, _Grades
from evalloop.run.judging import DeferredJudges
from evalloop.run.placement import SLOW, Placement, call_on_thread
from evalloop.run.prepared import PreparedRun
from evalloop.run.signals import IN_PLACE
from evalloop.score import Score
from evalloop.scoring.scorevec import ids_digest
from evalloop.suites.models import Case

ProgressFn = Callable[[int], None]


@dataclass
class ExecutedRun:
    """What executing a prepared run produced (:func:`~evalloop.run.runner.execute` returns it): the stored run, its
    summaries, and notable messages. What the run *means* once judged is
    :class:`evalloop.verdicts.outcome.RunOutcome`."""

    run: Run
    summaries: dict[str, ScorerSummary]
    results: dict[str, ScorerResult]
    case_errors: int = 0
    first_case_error: str = ""
    notices: list[str] = field(default_factory=list)
    tagged: bool = False
    digest: str | None = None  # the run's case list (scorevec.ids_digest), as its score vectors name it

    @property
    def target_failures(self) -> int:
        """Case results (case × epoch) the target failed: raised, timed out, unparseable output."""
        return self.run.target_failures or 0

    @property
    def infra_failures(self) -> int:
        """Case results lost to the infrastructure (API or network faults): errored."""
        return self.run.infra_failures or 0


class RunState:
    """A run in progress: its grades by scorer, the rows not yet written, its counts and usage."""

    def __init__(self, run: Run, prepared: PreparedRun, store: HistoryStore, services: Services,
                 grades: dict[str, _Grades], batch_size: int, progress: ProgressFn | None, n_cases: int):
        self.run, self.prepared, self.store, self.services = run, prepared, store, services
        self.run_id: str = run.id  # a plain str: the ORM attribute costs a descriptor call per case
        self.grades, self.batch_size, self.progress = grades, batch_size, progress
        self.ids: list[str] = [""] * n_cases  # case ids by position: one list every scorer's vector shares
        self.case_rows: list[tuple[Any, ...]] = []
        self.score_rows: list[tuple[Any, ...]] = []
        self.case_errors = 0
        self.calls = 0
        self.first_case_error = ""
        self.tagged = False
        self.totals: dict[str, Any] = {**RUN_TOTALS, "target_failures": 0, "infra_failures": 0}
        self.notices: list[str] = []
        self.budget: Budget | None = None
        self.max_output: int | None = None  # bytes of an output stored (history.outputs)
        # looked up once, not per case
        self.scoring = [(b, b.name, grades[b.name]) for b in prepared.scorers]
        self.scoring_now = self.scoring  # the scorers that grade a case as soon as it has its output
        self.judging: DeferredJudges | None = None
        self.timeout = prepared.suite.timeout
        self.placement = Placement(prepared.suite.target_threads, is_async=prepared.target.is_async,
                                   timeout=self.timeout)
        self.wants_ctx = prepared.target.wants_ctx or any(b.spec.wants_ctx for b in prepared.scorers)

    async def worker(self, work: Iterator[tuple[int, Case, int]]) -> None:
        """Run cases one after another. The usage scope and the epoch variable are set once per
        worker, not per case: a worker's cases never overlap, so what a case's LLM calls record is
        read and cleared when the case ends (:meth:`one`)."""
        usage, usage_token = open_scope()
        epoch_token = _EPOCH.set(current := 0)
        yielded = time.perf_counter()
        try:
            for i, (row, case, epoch) in enumerate(work, start=1):
                if epoch != current:
                    _EPOCH.set(current := epoch)
                try:
                    await self.one(case, epoch, row, usage)
                except BudgetExceeded:  # the case is dropped, what it spent is kept; no new case starts
                    self.count_usage(usage)
                    return
                if self.budget is not None and self.budget.exceeded:
                    return
                # let signals, cancellation and other workers in, even for sync targets: every 8
                # cases, but no more than once in 2 ms (a trip through the loop costs microseconds)
                if i % 8 == 0 and (now := time.perf_counter()) - yielded > 0.002:
                    await asyncio.sleep(0)
                    yielded = now
        finally:
            close_scope(usage_token)
            _EPOCH.reset(epoch_token)

    async def one(self, case: Case, epoch: int, row: int, usage: UsageTotals) -> None:
        """Run one case in one epoch: call the target, grade its output, queue the rows.

        The common case — a sync target, sync scorers, no deadline, nothing that asks for a
        context — calls the target and the scorers in place, with no coroutine of their own, no
        context object and no thread: the per-case cost is the run's floor when the target is
        trivial. ``usage`` is the worker's open usage scope."""
        if case.fixed_output:  # a negative control that tests the scorers: no target call
            await self.fixed(case, epoch, row, usage)
            return
        prepared, run_id, target = self.prepared, self.run_id, self.prepared.target
        case_id = case.id
        self.ids[row] = case_id
        ctx = CaseContext(prepared.suite.name, run_id, case, epoch, self.services) if self.wants_ctx else None
        error: str | None = None
        trace: str | None = None
        failure: Failure | None = None
        output: Any = None
        placement = self.placement
        started = time.perf_counter()
        try:
            if placement.inline:
                cpu = time.thread_time() if placement.probing else None  # does the call wait?
                IN_PLACE.enter()  # Ctrl-C / SIGTERM interrupt the call here (run.signals)
                try:
                    output = target.start(case.input, ctx)
                finally:
                    IN_PLACE.active = False
                    if cpu is not None or time.perf_counter() - started >= SLOW:
                        placement.held(time.perf_counter() - started,
                                       None if cpu is None else time.thread_time() - cpu)
                if is_awaitable(output):
                    output = await output
            else:
                output = await call_on_thread(placement, target, case.input, ctx, self.timeout)
        except EvalloopError as exc:
            if not _is_case_level(exc):
                exc.where = f"{exc.where}, case '{case_id}'" if exc.where else f"case '{case_id}'"
                raise
            error, failure = f"{type(exc).__name__}: {exc.what}", classify(exc)
        except TargetTimeout as exc:
            error, failure = str(exc), Failure.TARGET
        except Exception as exc:
            # exception texts carry URLs: redacted before they reach history or a report
            error, failure = redact_text(f"{type(exc).__name__}: {exc}"), classify(exc)
            trace = traceback_of(exc)
        latency_ms = (time.perf_counter() - started) * 1000.0
        scores: list[Score] = []
        scoring = self.scoring if failure is not None else self.scoring_now
        for bound, _, _ in scoring:
            if failure is Failure.INFRA:  # the API or network failed: errored, never a real 0
                score = Score.infrastructure(error or "")
            elif failure is Failure.TARGET:  # the product failed its case: a real 0
                score = Score.target_failure(error or "")
            else:
                graded = bound.grade(case, output, ctx)
                score = graded if isinstance(graded, Score) else await graded
            scores.append(score)
        if failure is None and self.judging is not None:  # its judges grade it later (run.judging)
            self.judging.defer(row, case, epoch, output)
        self.calls += 1
        if error is not None:
            self.case_errors += 1
            self.first_case_error = self.first_case_error or f"case '{case_id}': {error}"
        else:
            for score in scores:  # a scorer that could not parse the output (a loop: no generator per case)
                if score.failure is Failure.TARGET:
                    failure = Failure.TARGET
                    break
        if failure is not None:
            self.totals[f"{failure.value}_failures"] += 1
        tags = case.tags
        cost, input_tokens, output_tokens = 0.0, 0, 0
        if usage.calls or usage.cache_hits or usage.retries:  # evalloop's LLM clients were called
            cost, input_tokens, output_tokens = usage.cost_usd, usage.input_tokens, usage.output_tokens
            self.count_usage(usage)
        stored, full, sha = None, None, None
        if error is None:
            stored = dumps(output)
            if self.max_output is not None and len(stored) > self.max_output // 4:  # may be past the cap
                stored, full, sha = cap_output(stored, self.max_output)
        # rows as tuples in the store's column order (CASE_RESULT_COLUMNS, CASE_SCORE_COLUMNS)
        self.case_rows.append((run_id, case_id, epoch, ",".join(tags) or None, stored, error,
                               failure.value if failure else None, latency_ms, cost, input_tokens, output_tokens,
                               trace, full, sha))
        if tags:
            self.tagged = True
        plain = case.expect == "pass"  # no scorer treats it as a known-bad control
        score_rows = self.score_rows
        for (_, name, grades), score in zip(scoring, scores, strict=True):
            grades.add(row, score, not plain and case.expects_fail(name))
            score_rows.append((run_id, case_id, epoch, name, score.value, score.errored, score.skipped,
                               score.message, dumps(score.metadata) if score.metadata else None))
        if len(self.case_rows) >= self.batch_size:
            self.flush()
        if self.progress is not None:
            self.progress(1)

    def defer_judges(self, judging: DeferredJudges) -> None:
        """Let ``judging``'s scorers grade after every case has its output (``early_stop``)."""
        self.judging = judging
        self.scoring_now = [t for t in self.scoring if t[1] not in judging.names]

    def record_score(self, row: int, case: Case, epoch: int, name: str, score: Score, control: bool) -> None:
        """A grade taken after its case's row was written (a deferred judge's)."""
        self.grades[name].add(row, score, control)
        self.score_rows.append((self.run_id, case.id, epoch, name, score.value, score.errored, score.skipped,
                                score.message, dumps(score.metadata) if score.metadata else None))
        if len(self.score_rows) >= self.batch_size:
            self.flush()

    async def fixed(self, case: Case, epoch: int, row: int, usage: UsageTotals) -> None:
        """A negative control with a fixed output: the target is not called; the scorers the case
        is a control of grade that output, the others leave it ungraded (it is no product case)."""
        case_id = case.id
        self.ids[row] = case_id
        ctx = CaseContext(self.prepared.suite.name, self.run_id, case, epoch, self.services) \
            if self.wants_ctx else None
        graded: list[tuple[_Grades, str, Score]] = []
        for bound, name, grades in self.scoring:
            if case.tests_scorer(name):
                out = bound.grade(case, case.output, ctx)
                graded.append((grades, name, out if isinstance(out, Score) else await out))
        cost, input_tokens, output_tokens = 0.0, 0, 0
        if usage.calls or usage.cache_hits or usage.retries:  # a judge graded it
            cost, input_tokens, output_tokens = usage.cost_usd, usage.input_tokens, usage.output_tokens
            self.count_usage(usage)
        tags = case.tags
        self.case_rows.append((self.run_id, case_id, epoch, ",".join(tags) or None, dumps(case.output), None,
                               None, 0.0, cost, input_tokens, output_tokens, None, None, None))
        if tags:
            self.tagged = True
        for grades, name, score in graded:
            grades.add(row, score, True, tests_scorer=True)
            self.score_rows.append((self.run_id, case_id, epoch, name, score.value, score.errored, score.skipped,
                                    score.message, dumps(score.metadata) if score.metadata else None))
        if len(self.case_rows) >= self.batch_size:
            self.flush()
        if self.progress is not None:
            self.progress(1)

    def count_usage(self, usage: UsageTotals) -> None:
        """Add what a case's LLM calls used to the run's totals, and start the scope again."""
        if usage.note is not None and not self.notices:  # said once per run
            self.notices.append(usage.note)
        usage.move_to(self.totals)

    def flush(self) -> None:
        cases, scores = self.case_rows, self.score_rows
        self.case_rows, self.score_rows = [], []
        self.store.add_results(cases, scores)

    def finish(self, errored_limit: float) -> ExecutedRun:
        ids = self.ids if all(self.ids) else [c or f"#{i}" for i, c in enumerate(self.ids)]  # never-run cases
        results = {b.name: self.grades[b.name].result(b, errored_limit, ids) for b in self.prepared.scorers}
        measured = self.prepared.measurements
        summaries = {name: r.summary(self.run.id, measured.get(name)) for name, r in results.items()}
        invalid = [r.invalid for r in results.values() if r.invalid]
        stopped: dict[str, Any] = {}
        if self.budget is not None and self.budget.exceeded:  # one line first: what it spent
            invalid.insert(0, f"{self.budget.describe()}; {self.calls} of "
                              f"{len(self.ids) * self.run.epochs} case results run")
            stopped["partial"] = True  # never a baseline
        elif self.calls and self.case_errors == self.calls:  # nothing was answered: not a result
            invalid.insert(0, f"every target call failed ({self.calls}/{self.calls}; first: "
                              f"{self.first_case_error[:200]})")
        mean_ok = all(s.mean is None or math.isfinite(s.mean) for s in summaries.values())
        notes: dict[str, Any] = json_object(self.run.notes)
        stats_hook = getattr(self.prepared.target.fn, "run_stats", None)
        if callable(stats_hook):  # e.g. a retriever's index build time, index size, query latency
            notes["target_stats"] = dict(stats_hook())
        if (placed := self.placement.describe()) is not None:
            notes["target_calls"] = placed
        if self.judging is not None:
            notes["early_stop"], said = self.judging.describe()
            self.notices.extend(said)
        digest = ids_digest(ids)
        vectors = [ScoreVector(run_id=self.run.id, scorer=name, digest=digest, n=len(ids),
                               data=r.vector.astype("<f8").tobytes()) for name, r in results.items()]
        run = self.store.finish_run(
            self.run.id, summaries.values(), vectors, status=RunStatus.COMPLETED,
            valid=not invalid and mean_ok, invalid_reason="; ".join(invalid) or None,
            ended_at=utcnow(), case_errors=self.case_errors, notes=jsonable(notes), **self.totals, **stopped,
        )
        return ExecutedRun(run, summaries, results, self.case_errors, self.first_case_error,
                          notices=self.notices, tagged=self.tagged, digest=digest)
