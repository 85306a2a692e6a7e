"""The runner: calls the target on every case, grades each output, and persists as it goes.

Cases are streamed (never all held), run by a bounded pool of asyncio workers, and written
to history in batches. A target that raises or times out fails only its case: a real 0 for
every scorer, or an *errored* score when the failure is the infrastructure's
(:mod:`evalloop.run.failures`); a scorer that raises gives an *errored* score. An interrupted run
is marked so and kept out of baselines. The runner knows nothing of baselines.

This module owns :func:`execute`, the run loop; a run is prepared in :mod:`evalloop.run.prepared`
(``prepare``, ``PreparedRun``) and collected, while it runs, by :mod:`evalloop.run.runstate`
(``RunState``, finishing into ``ExecutedRun``). All of them are importable from here.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import socket
from collections.abc import Callable, Iterator
from typing import Any

from evalloop.config import Settings
from evalloop.errors import FixtureError
from evalloop.history.details import jsonable
from evalloop.history.eligibility import base_fingerprint
from evalloop.history.models import Run, RunStatus
from evalloop.history.provenance import new_run_id
from evalloop.history.store import HistoryStore
from evalloop.llm.budget import budget_scope
from evalloop.run.bound import BoundScorer as BoundScorer
from evalloop.run.context import Services
from evalloop.run.grades import ScorerResult as ScorerResult
from evalloop.run.grades import _Grades
from evalloop.run.judging import DeferredJudges, StopRule
from evalloop.run.options import RunOptions
from evalloop.run.prepared import PreparedRun as PreparedRun
from evalloop.run.prepared import prepare as prepare
from evalloop.run.runstate import ExecutedRun as ExecutedRun
from evalloop.run.runstate import ProgressFn, RunState
from evalloop.run.signals import interrupt_in_place
from evalloop.run.targets import stable_hash
from evalloop.score import ScorerKind
from evalloop.suites.models import Case


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
    state = RunState(run, prepared, store, services, grades, batch_size, progress, n_cases)
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
