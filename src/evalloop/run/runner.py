"""The runner: calls the target on every case, grades each output, and persists as it goes.

Cases are streamed (never all held), run by a bounded pool of asyncio workers, and written
to history in batches. A target that raises or times out fails only its case: a real 0 for
every scorer, or an *errored* score when the failure is the infrastructure's
(:mod:`evalloop.run.failures`); a scorer that raises gives an *errored* score. An interrupted run
is marked so and kept out of baselines. The runner knows nothing of baselines.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
import os
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from evalloop.config import Settings
from evalloop.errors import EvalloopError, FixtureError
from evalloop.history import identity
from evalloop.history.details import json_object, jsonable
from evalloop.history.eligibility import base_fingerprint
from evalloop.history.models import Run, RunStatus, ScorerSummary, ScoreVector, utcnow
from evalloop.history.outputs import cap_output
from evalloop.history.provenance import new_run_id
from evalloop.history.store import HistoryStore, dumps
from evalloop.llm.budget import Budget, budget_scope
from evalloop.llm.cache import current_epoch as _EPOCH
from evalloop.llm.errors import BudgetExceeded
from evalloop.llm.errors import is_case_level as _is_case_level
from evalloop.llm.usage import RUN_TOTALS, UsageTotals, close_scope, open_scope
from evalloop.redact import redact_text
from evalloop.run.bound import BoundScorer
from evalloop.run.calling import is_awaitable, traceback_of
from evalloop.run.context import CaseContext, Services
from evalloop.run.failures import Failure, TargetTimeout, classify
from evalloop.run.grades import ScorerResult, _Grades
from evalloop.run.judging import DeferredJudges, StopRule
from evalloop.run.options import RunOptions
from evalloop.run.placement import SLOW, Placement, call_on_thread
from evalloop.run.signals import IN_PLACE, interrupt_in_place
from evalloop.run.targets import Target, resolve_target, stable_hash
from evalloop.score import Score, ScorerKind
from evalloop.scoring.registry import Registry
from evalloop.scoring.scorevec import ids_digest
from evalloop.suites.models import Case, Suite

ProgressFn = Callable[[int], None]


@dataclass
class PreparedRun:
    """Everything checked before a run may write anything: cases, scorers, target."""

    suite: Suite
    n_cases: int
    scorers: list[BoundScorer]
    target: Target
    fingerprint: dict[str, Any]

    @property
    def fingerprint_hash(self) -> str:
        return stable_hash(self.fingerprint)

    @property
    def product(self) -> str | None:
        """The hash of the product this run tests (:mod:`evalloop.history.identity`)."""
        return identity.product_hash(self.fingerprint)

    @property
    def measurements(self) -> dict[str, str]:
        """Each scorer's measurement hash: its code, parameters and judge model."""
        return identity.measurement_hashes(self.fingerprint)


@dataclass
class ExecutedRun:
    """What executing a prepared run produced (:func:`execute` returns it): the stored run, its
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


def prepare(suite: Suite, registry: Registry, *, project_dir: Any = None,
            settings_thresholds: dict[str, float] | None = None,
            target_params: dict[str, Any] | None = None, services: Services | None = None,
            verdict_defaults: dict[str, Any] | None = None) -> PreparedRun:
    """Validate the suite's cases, bind its scorers, and resolve its target. Writes nothing."""
    where = str(suite.path or suite.name)
    n_cases = suite.validate_cases()
    bound = []
    for ref in suite.scorers:
        spec = registry.get(ref.name, where=where)
        spec.check_params(ref.params, where=where)
        project = settings_thresholds or {}
        # the most specific setting wins: the scorer's entry, the suite's thresholds, the
        # suite's verdict block, the project (by name, then kind), the registration, the kind
        threshold = next(t for t in (ref.threshold, suite.thresholds.get(ref.label), suite.verdict.threshold,
                                     project.get(ref.name), project.get(spec.kind.value),
                                     spec.effective_threshold) if t is not None)
        pass_mark = next(m for m in (ref.pass_mark, suite.verdict.pass_mark, spec.pass_mark)
                         if m is not None)
        # the floor: the scorer's entry, the suite's verdict block, the project, the registration, the kind
        floor = next(m for m in (ref.min_score, suite.verdict.min_score,
                                 (verdict_defaults or {}).get("min_score"), spec.min_score,
                                 spec.kind.default_target)
                     if m is not None)
        policy = {**(verdict_defaults or {}), **suite.verdict.overrides(), "threshold": threshold,
                  "pass_mark": pass_mark, "min_score": floor}
        _check_policy(policy, where)
        bound.append(BoundScorer(spec, dict(ref.params), threshold, pass_mark, policy, ref.label,
                                 timeout=ref.timeout or suite.timeout))
    params = {**suite.target.params, **(target_params or {})}
    target = resolve_target(suite.target.ref, params, project_dir=project_dir,
                            threads=suite.target_threads, services=services)
    if suite.target_threads is False and suite.timeout is not None and not target.is_async:
        raise FixtureError("'target_threads: false' and 'timeout:' cannot both hold for a sync target: "
                           "a call in place cannot be cut at its deadline", where=where,
                           hint="drop one of them (see docs/targets.md)")
    cases_hash = _cases_hash(suite)
    fingerprint = {
        "target": target.ref,
        "target_params": target.params,
        "target_fingerprint": target.fingerprint,
        "scorers": [_describe_scorer(b, services, project_dir) for b in bound],
        "cases": cases_hash,
    }
    return PreparedRun(suite, n_cases, bound, target, fingerprint)


def _describe_scorer(bound: BoundScorer, services: Services | None, project_dir: Any = None) -> dict[str, Any]:
    """A scorer in the run's fingerprint: its settings, a hash of its code (a judge's prompt lives
    there), and for a judge the model that grades. A project scorer's file is named relative to
    the project, so a clone elsewhere has the same fingerprint."""
    import inspect
    from pathlib import Path

    try:
        code = stable_hash(inspect.getsource(bound.spec.fn))
    except (OSError, TypeError):
        code = None
    source = bound.spec.source
    if project_dir is not None:
        with contextlib.suppress(ValueError, OSError):
            source = Path(source).resolve().relative_to(Path(project_dir).resolve()).as_posix()
    info = {"name": bound.name, "kind": bound.kind.value, "params": bound.params,
            "threshold": bound.threshold, "source": source, "code": code}
    if bound.kind == ScorerKind.LLM_JUDGE:
        judge = getattr(services, "judge", None)
        info["model"] = bound.params.get("model") or getattr(judge, "model", None)
    return info


def _check_policy(policy: dict[str, Any], where: str) -> None:
    from pydantic import ValidationError

    from evalloop.errors import FixtureError
    from evalloop.policy import VerdictPolicy

    try:
        VerdictPolicy(**policy)
    except ValidationError as exc:
        from evalloop import validation

        err = validation.first(exc)
        raise FixtureError(f"verdict setting '{validation.location(err)}': {validation.message(err, VerdictPolicy)}",
                           where=where, hint="see docs/verdicts.md") from None


def _cases_hash(suite: Suite) -> str:
    """A hash of the fixtures: the suite file and its JSONL cases file, byte for byte."""
    import hashlib

    digest = hashlib.sha256()
    paths = [suite.path, suite.cases_file]
    if suite.dataset_dir is not None:
        paths += sorted(suite.dataset_dir.glob("*.jsonl"))
    for path in paths:
        if path is not None and path.is_file():
            with path.open("rb") as handle:  # in chunks: a large fixture is not held twice
                while chunk := handle.read(1 << 20):
                    digest.update(chunk)
    if suite.path is None and isinstance(suite.cases, list):
        digest.update(dumps([c.model_dump(mode="json") for c in suite.cases]).encode())
    return digest.hexdigest()[:16]


async def execute(
    prepared: PreparedRun,
    store: HistoryStore,
    options: RunOptions | None = None,
    *,
    services: Services | None = None,
    settings: Settings | None = None,
    progress: ProgressFn | None = None,
    on_begin: Callable[[Run], None] | None = None,
    judge_stop: StopRule | None = None,
    notes: dict[str, Any] | None = None,
    code_version: str | None = None,
    batch_size: int = 1000,
) -> ExecutedRun:
    """Run a prepared suite with ``options`` (:class:`~evalloop.run.options.RunOptions`), storing
    everything. Interrupts mark the run and re-raise.

    The options read here: ``epochs``, ``limit`` and ``concurrency`` (else the suite's, else the
    project's); ``select`` keeps only the cases it accepts (``-k``/``--tag``): the run is then
    partial, compared like ``--limit`` but never a baseline; ``max_cost`` (else the suite's) is the
    run's cost budget in USD (:mod:`evalloop.llm.budget`): once spent, no new case starts, the cases
    in flight finish, and the run is marked invalid saying what it spent; an ``ablation`` run is
    partial whatever it ran (never a baseline). ``settings`` (else the defaults) give the project's
    concurrency, errored-grade limit and output cap (:mod:`evalloop.history.outputs`; 0: no cap).
    ``on_begin`` is told the run once it is stored (batch mode records its batches under it). With
    the suite's ``early_stop``, ``judge_stop`` says when its judges may stop (:mod:`evalloop.run.judging`)."""
    options = options or RunOptions()
    settings = settings or Settings()
    suite = prepared.suite
    services = services or Services()
    epochs = options.epochs or suite.epochs
    concurrency = options.concurrency or suite.concurrency or settings.concurrency
    select, limit = options.select, options.limit
    available = prepared.n_cases
    if select is not None:
        available = sum(1 for case in suite.iter_cases() if select(case))
        if available == 0:
            raise FixtureError("no case matches the case filter (-k/--tag)", where=suite.name,
                               hint="check the pattern and tags (`evalloop show RUN` lists case ids)")
    n_cases = min(available, limit) if limit else available
    run = store.begin_run(Run(
        id=new_run_id(), suite=suite.name, status=RunStatus.RUNNING, code_version=code_version,
        fingerprint=jsonable(prepared.fingerprint), fingerprint_hash=prepared.fingerprint_hash,
        base_fingerprint=stable_hash(base_fingerprint(prepared.fingerprint)), product_fingerprint=prepared.product,
        n_cases=n_cases, epochs=epochs,
        partial=options.partial or n_cases < prepared.n_cases or suite.head_only is not None,
        notes=jsonable({**(notes or {}), "host": socket.gethostname(), "pid": os.getpid()}),
    ))
    if on_begin is not None:
        on_begin(run)
    grades = {b.name: _Grades(n_cases) for b in prepared.scorers}
    state = _RunState(run, prepared, store, services, grades, batch_size, progress, n_cases)
    state.max_output = settings.max_output_bytes or None
    work: Iterator[tuple[int, Case, int]] = (
        (row, case, epoch) for epoch in range(epochs)
        for row, case in enumerate(itertools.islice(
            suite.iter_cases() if select is None else filter(select, suite.iter_cases()), n_cases))
    )
    judges = [b for b in prepared.scorers if b.kind is ScorerKind.LLM_JUDGE]
    if suite.early_stop is not None and judge_stop is not None and judges:
        state.defer_judges(DeferredJudges(judges, judge_stop, suite.early_stop.looks, seed=run.id))
    budget = options.max_cost if options.max_cost is not None else suite.max_cost
    try:
        with budget_scope(budget) as state.budget:  # the workers' calls inherit it
            n_workers = max(1, min(concurrency, n_cases * epochs))
            workers = [asyncio.create_task(state.worker(work)) for _ in range(n_workers)]
            if state.judging is not None:  # the deferred judges, once every case has its output
                workers.append(asyncio.create_task(state.judging.judge(state, workers[:], concurrency)))
        with interrupt_in_place():  # Ctrl-C stops a sync call in place at once, not when it returns
            try:
                await asyncio.gather(*workers)
            except BaseException:
                for task in workers:
                    task.cancel()
                await asyncio.gather(*workers, return_exceptions=True)
                raise
        state.flush()
    except (KeyboardInterrupt, asyncio.CancelledError):
        with contextlib.suppress(Exception):
            state.flush()
        store.mark(run.id, RunStatus.INTERRUPTED, "interrupted before completion")
        raise
    except BaseException as exc:
        with contextlib.suppress(Exception):
            state.flush()
        store.mark(run.id, RunStatus.FAILED, f"{type(exc).__name__}: {exc}")
        raise
    return state.finish(settings.errored_limit)


class _RunState:
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
