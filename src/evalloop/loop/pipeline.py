"""One run end to end: load the suite, check it, run it, store it, compare it with its baseline.

Each step is its own module; this one only chains them with typed values, so the CLI, the
scheduler and Python callers all run suites the same way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalloop.config import Settings, load_settings
from evalloop.errors import EvalloopError
from evalloop.history import runlog
from evalloop.history.details import run_notes
from evalloop.history.provenance import code_version
from evalloop.history.store import HistoryStore
from evalloop.loop.heldout import held_out_part
from evalloop.run import batchmode
from evalloop.run.bridge import BridgeRecord, bridge_runs
from evalloop.run.context import Services
from evalloop.run.options import RunOptions
from evalloop.run.runner import ExecutedRun, PreparedRun, execute, prepare
from evalloop.run.services import NO_LLM_NOTICE, build_services, close_services
from evalloop.score import passes
from evalloop.scoring.registry import Registry, discover
from evalloop.scoring.scorevec import Vector
from evalloop.suites.lookup import find_suite
from evalloop.suites.models import Suite
from evalloop.verdicts.baseline import Comparison, baseline_windows, compare_run
from evalloop.verdicts.identity import Windows, bridge_plan, bridge_summary

if TYPE_CHECKING:
    from evalloop.learning.incidents import Learned


@dataclass
class RunReport:
    """A finished run, its comparison with the baseline, and anything worth telling the user."""

    prepared: PreparedRun
    executed: ExecutedRun  # the run as it was executed (its verdict's outcome: verdicts.outcome.run_outcome)
    comparison: Comparison
    notices: list[str] = field(default_factory=list)
    extras: dict[str, Any] = field(default_factory=dict)
    held_out: set[str] = field(default_factory=set)  # the held-out cases of the run (never in a lesson)
    ablation: RunReport | None = None  # the ablation run this run started for held incidents, if any

    @property
    def suite(self) -> Suite:
        return self.prepared.suite


def load(suite: str | Path | Suite, settings: Settings, limit: int | None = None) -> Suite:
    """A suite by name, by path, or as given (``limit``: read no further than its first N cases)."""
    if isinstance(suite, Suite):
        return suite
    return find_suite(str(suite), settings.project_dir, limit=limit)


async def arun_suite(
    suite: str | Path | Suite,
    options: RunOptions | None = None,
    *,
    settings: Settings | None = None,
    registry: Registry | None = None,
    store: HistoryStore | None = None,
    services: Services | None = None,
    progress: Callable[[int], None] | None = None,
    on_start: Callable[[PreparedRun], None] | None = None,
) -> RunReport:
    """Run one suite with ``options`` (:class:`~evalloop.run.options.RunOptions`) and compare it
    with its rolling baseline (async).

    ``options.engine`` (auto/local/llm), ``model`` and ``cache`` (use/off/only) choose the services
    when none are given; services built here are closed when the run ends. ``select`` keeps
    only the cases it accepts (a partial run, never a baseline). ``max_cost`` (USD, else the
    suite's ``max_cost``) is the run's cost budget. ``batch`` (else the suite's ``batch``) sends
    the LLM calls through the provider's batch API; ``resume`` names a batch run to collect
    from instead of submitting again (:mod:`evalloop.run.batchmode`). ``nightly`` judges the run
    as one night of a series, with the suite's alarm budget (:mod:`evalloop.verdicts.sequential`).
    ``bridge=False`` (``--no-bridge``): a scorer whose measurement changed (a judge model, a rubric)
    restarts its baseline instead of re-grading the baseline runs' stored outputs
    (:mod:`evalloop.verdicts.identity`). ``progress`` is told of every case result as it is
    stored, ``on_start`` of the prepared run before its first case.
    """
    options = options or RunOptions()
    settings = settings or load_settings()
    registry = registry or discover(settings.project_dir)
    suite_obj = load(suite, settings, options.limit if options.select is None else None)
    notices: list[str] = []
    owned = services is None
    if services is None:
        batched = bool(options.resume) or (options.batch if options.batch is not None else suite_obj.batch)
        services, notices = build_services(settings, engine=options.engine, model=options.model,
                                           cache=options.cache, concurrency=options.concurrency, batch=batched)
    try:
        report = await _run(suite_obj, settings, registry, store, services, options, progress, on_start)
    finally:
        if owned:
            await close_services(services)
    if not needs_llm(report.prepared):  # "no API key" says nothing to a suite without an LLM
        notices = [n for n in notices if not n.startswith(NO_LLM_NOTICE)]
    report.notices[:0] = notices
    return report


def _judge_stop(suite: Suite, store: HistoryStore, settings: Settings) -> Any:
    """The early-stop rule of a suite with ``early_stop`` (:mod:`evalloop.verdicts.early_stop`), else None."""
    if suite.early_stop is None:
        return None
    from evalloop.verdicts.early_stop import SequentialStop

    return SequentialStop(store, suite.window or settings.window, kind=suite.early_stop.spending,
                          power_loss=suite.early_stop.power_loss)


def needs_llm(prepared: PreparedRun) -> bool:
    """Whether a suite uses an LLM: an LLM judge or operation scorer, or a target that says so
    (``uses_llm = True``, or an ``engine`` in its fingerprint, as the reference operations)."""
    from evalloop.score import ScorerKind

    target = prepared.target
    return (any(b.kind in (ScorerKind.LLM_JUDGE,) for b in prepared.scorers)
            or bool(getattr(target.fn, "uses_llm", False)) or "engine" in target.fingerprint)


async def _run(suite_obj: Suite, settings: Settings, registry: Registry, store: HistoryStore | None,
               services: Services, options: RunOptions, progress: Callable[[int], None] | None = None,
               on_start: Callable[[PreparedRun], None] | None = None) -> RunReport:
    notices: list[str] = []
    unreadable = False  # memories that could not be read are not re-read to resolve incidents
    if settings.inject_failures and _has_memories(settings):
        from evalloop.learning import injection  # the memory layers: only for a project that has memories

        injected, notice = injection.injected_for(settings, suite_obj)
        services.extras.update(failure_patterns=injected.text, failure_memory_ids=injected.memory_ids,
                               failure_memories=injected.records, lesson_records=injected.lesson_records)
        notices += [notice] if notice else []
        notices += [injection.skipped_notice(injected.skipped)] if injected.skipped else []
        unreadable = notice is not None
    prepared = prepare(suite_obj, registry, project_dir=settings.project_dir,
                       settings_thresholds=settings.thresholds, services=services,
                       verdict_defaults=settings.verdict.model_dump(exclude_none=True))
    store = store or HistoryStore(settings.database_url)
    store.lease_seconds, store.beat_seconds = settings.lease_seconds, settings.heartbeat_seconds
    reaped = store.reap_dead_runs()  # runs left 'running' by a process that died are failed now
    if reaped:
        notices.append(f"marked failed {len(reaped)} run(s) whose process died: {', '.join(reaped[:3])}")
    if settings.run_log:  # a fresh clone gets its baseline from the committed run log
        runlog.sync_suite(store, settings.history_dir, suite_obj.name)
    if on_start is not None:
        on_start(prepared)
    resume, ablation = options.resume, list(options.ablation)
    lease = batchmode.claim_resume(store, resume) if resume else None  # one resumer per run
    try:
        on_begin = batchmode.wire(services, store, resume)
        if on_begin is not None:  # every case in flight: a batch carries a whole stage of the run
            options = options.model_copy(update={"concurrency": batchmode.BATCH_IN_FLIGHT})
            notices += batchmode.without_deadline(prepared)
        executed = await execute(
            prepared, store, options, services=services, settings=settings, progress=progress,
            on_begin=on_begin, judge_stop=_judge_stop(suite_obj, store, settings),
            code_version=code_version(settings.project_dir, settings.env),
            notes={"engine": services.engine, "model": getattr(services.llm or services.judge, "model", None),
                   **({"batch": True} if on_begin else {}), **({"resumed_from": resume} if resume else {}),
                   **({"fire": settings.env.fire_entry} if settings.env.fire_entry else {}),
                   **({"ablation": ablation} if ablation else {})},
        )
    finally:
        if lease is not None:
            lease.release()
    if resume:
        notices.append(batchmode.resume_notice(services, resume))
    window = suite_obj.window or settings.window
    windows = baseline_windows(store, executed.run, window)
    bridged = await _bridge(prepared, store, services, windows, options.bridge and not executed.run.partial,
                            settings, options)
    comparison = compare_run(store, executed.run, window=window,
                             current={name: Vector(r.ids, r.vector, digest=executed.digest)
                                      for name, r in executed.results.items()},
                             nightly=options.nightly, scopes=None if executed.tagged else {}, windows=windows)
    report = RunReport(prepared, executed, comparison, notices=[*notices, *executed.notices])
    if bridged:
        report.extras["bridge"] = bridge_summary(bridged)
        report.notices += [f"not bridged: run {r.run} ({r.reason})" for r in bridged if not r.made]
    report.held_out, report.extras["held_out"] = held_out_part(suite_obj, executed)
    if (settings.learn and comparison.has_regression) or services.extras.get("failure_memory_ids"):
        near = suite_obj.near_duplicate_notice()  # only where a lesson is written or read: it costs an embedder
        if near:
            report.notices.append(near)
    stats = run_notes(executed.run).target_stats
    if stats:
        report.extras["target_stats"] = stats
    if executed.tagged:
        from evalloop.history.strata import strata_means

        strata = strata_means(store, executed.run.id, order=[s.scorer for s in comparison.scorers])
        if strata.strata:
            report.extras["strata"] = strata.model_dump(mode="json")
    if comparison.fingerprint_change is not None:
        report.notices.append(comparison.fingerprint_change.describe())
    rate = comparison.target_failures
    if rate is not None and (rate.failures or rate.baseline_failures):
        report.notices.append(rate.describe())
    opens = _opens_incident(comparison)
    if settings.learn and opens and comparison.invalid:
        report.notices.append("no failure memory written: the run is invalid (too many errored grades), "
                              "so its verdicts cannot be trusted to teach anything")
    elif settings.learn and suite_obj.head_only is not None:  # its split is not the suite's (suites.yamlhead)
        if opens:
            report.notices.append("no failure memory written: a --limit run read only the suite's first "
                                  f"{suite_obj.head_only} cases, so which of them are held out is not known")
    elif settings.learn and not teaches(report):
        if opens:
            report.notices.append("no failure memory written: the run has no learn case (held-out cases "
                                  "only), and a lesson is built from learn cases alone")
    elif settings.learn and (opens or (_has_memories(settings) and not unreadable)):
        learned = _learn(settings, report, store)
        if learned:  # the cases an ablation reruns are not reported: the ablation says how many
            report.extras["memories"] = [item.model_dump(exclude={"ablate"}) for item in learned]
        wanted = sorted({c for item in learned for c in item.ablate})
        if wanted and not ablation:
            report.extras["ablation"] = await _ablate(
                report, [str(item.memory_id) for item in learned if item.ablate], wanted, settings, registry, store,
                services, options)
    if settings.run_log:
        try:
            runlog.append_run(store, settings.history_dir, executed.run.id, report.notices, executed.results)
            for made in (r.bridge for r in bridged if r.bridge is not None):
                runlog.append_run(store, settings.history_dir, made, report.notices)
        except OSError as exc:
            report.notices.append(f"run log not written: {exc}")
    return report


async def _bridge(prepared: PreparedRun, store: HistoryStore, services: Services, windows: Windows, allowed: bool,
                  settings: Settings, options: RunOptions) -> list[BridgeRecord]:
    """Re-grade the baseline runs of the scorers whose measurement changed (unless ``--no-bridge``,
    their policy's ``bridge: false``, or a partial run: a quick check never pays for a bridge; the
    next full run makes it), before the run is compared (:mod:`evalloop.run.bridge`)."""
    if not allowed or windows.change is None or not windows.change.measurement:
        return []
    scorers = [b for b in prepared.scorers if b.policy.get("bridge", True)]
    plan = bridge_plan(windows, {b.name for b in scorers})
    if not plan:
        return []
    return await bridge_runs(store, prepared.suite, scorers, prepared.fingerprint, prepared.measurements, plan,
                             services=services, concurrency=options.concurrency or prepared.suite.concurrency
                             or settings.concurrency, errored_limit=settings.errored_limit,
                             max_cost=options.max_cost if options.max_cost is not None else prepared.suite.max_cost)


async def _ablate(report: RunReport, incidents: list[str], cases: list[str], settings: Settings,
                  registry: Registry, store: HistoryStore, services: Services,
                  options: RunOptions) -> dict[str, Any]:
    """The ablation of held incidents: their remembered cases run again with lessons off (a
    partial run, never a baseline), whose learning step resolves an incident whose product is
    back without its lesson (:mod:`evalloop.learning.incident_machine`). Its cost is printed."""
    keys = ("failure_patterns", "failure_memory_ids", "failure_memories", "lesson_records")
    saved = {k: services.extras.get(k) for k in keys}
    services.extras.update(failure_patterns=None, failure_memory_ids=[], failure_memories=[], lesson_records=[])
    wanted = set(cases)
    try:
        # the same epochs, concurrency and budget; every case it remembers, judged alone (no nightly
        # series; a partial run is never bridged), never resumed
        ablating = RunOptions(epochs=options.epochs, concurrency=options.concurrency, max_cost=options.max_cost,
                              select=lambda case: case.id in wanted, ablation=tuple(incidents))
        sub = await _run(report.suite, settings.model_copy(update={"inject_failures": False}), registry, store,
                         services, ablating)
    finally:
        services.extras.update(saved)
    report.ablation = sub
    run = sub.executed.run
    moved = [m for m in sub.extras.get("memories") or [] if m.get("memory_id") in incidents]
    said = "; ".join(f"{m['scorer']}: {'resolved' if m['action'] == 'resolved' else 'still held by lesson'}"
                     for m in moved) or "no incident moved"
    report.notices.append(f"ablation run {run.id}: {len(wanted)} case(s) run again without lessons "
                          f"(${run.cost_usd:.4f}): {said}")
    report.notices += [n for n in sub.notices if n.startswith(("failure memor", "resolved failure memory"))
                       and not n.endswith(VERBS["ablated"])]  # the line above says it
    return {"run_id": run.id, "cases": len(wanted), "incidents": incidents, "cost_usd": run.cost_usd,
            "memories": moved}


def teaches(report: RunReport) -> bool:
    """Whether a run may move any incident: it graded at least one learn case. A run of held-out
    cases alone (``run --held-out``) writes, updates and resolves nothing."""
    ids = {c for r in report.executed.results.values() for c in r.ids}
    return bool(ids - report.held_out)


def _opens_incident(comparison: Comparison) -> bool:
    """Whether a verdict of the run opens an incident (a regression, a scorer below its floor);
    the learning package is imported only for a run with a failing verdict."""
    if not any(s.fails for s in comparison.scorers):
        return False
    from evalloop.learning.incident_machine import triggers

    return triggers(comparison)


def _has_memories(settings: Settings) -> bool:
    return bool(settings.memory_url) or settings.memory_file.exists()


def _case_details(report: RunReport, store: HistoryStore) -> dict[str, Any]:
    """Every scorer's graded scores, and the inputs, expected answers, outputs and scorer reasons
    of the run's failing cases (the baseline's last run is read only when learning needs it)."""
    run_id = report.executed.run.id
    results = list(report.executed.results.values())
    details: dict[str, Any] = {"scores": {name: r.scores for name, r in report.executed.results.items()},
                               "baseline": lambda s: store.case_scores(s.previous_run, s.scorer),
                               "held_out": report.held_out, "ran": list(results[0].ids) if results else None}
    failing = {c for r in results for c, v in r.scores.items() if not passes(v, r.pass_mark)}
    if not failing:
        return details
    if report.held_out and failing - report.held_out:  # a learn case fails: its output may quote a held-out one
        from evalloop.learning.heldout import Redactor

        every = list(report.suite.iter_cases())
        details["redact"] = Redactor.of(every, report.suite.held_out_ids())
        details["cases"] = {c.id: c for c in every if c.id in failing}
    else:
        details["cases"] = {c.id: c for c in report.suite.iter_cases() if c.id in failing}
    details["outputs"] = {r.case_id: r.output if r.output is not None else r.error
                          for r in store.case_results(run_id) if r.case_id in failing and r.epoch == 0}
    details["reasons"] = {name: store.case_messages(run_id, name, sorted(failing)[:200])
                          for name in report.executed.results}
    return details


#: what a run's notice says each learning action did (the failure memory's id and tags follow)
VERBS = {"opened": "stored", "reopened": "reopened", "updated": "updated", "resolved": "resolved",
         "held": "the run passed with its lesson injected: held (still injected, until its cases pass without it)",
         "released": "the lesson no longer holds the product: open again",
         "keep": "still held by its lesson", "ablated": "its cases still fail without the lesson: held"}


def _learn(settings: Settings, report: RunReport, store: HistoryStore | None = None) -> list[Learned]:
    """One learning step under the suite's lock: move the suite's incidents through their
    states, then keep this run out of the baseline for every scorer whose incident keeps it out
    (an active regression, a held lesson). A failing store is reported, never raised."""
    from evalloop.learning import incidents as learning
    from evalloop.learning import injection
    from evalloop.learning.evidence import StoredHistory

    comparison, notices = report.comparison, report.notices
    store = store or HistoryStore(settings.database_url)
    suite = comparison.run.suite
    try:
        with learning.step_lock(store.engine, suite):
            adapter = injection.open_adapter(settings)
            try:
                every = report.suite.ablation_every
                learned = learning.learn(comparison, adapter, **_case_details(report, store),
                                         history=StoredHistory(store),
                                         ablation_every=settings.learning.ablation_every if every is None else every)
                still_open: set[str] = set()
                if not learned or any(not item.error for item in learned):  # not an unreachable store
                    still_open = learning.kept_out_scorers(adapter, suite) & {s.scorer for s in comparison.scorers}
            finally:
                injection.close_adapter(adapter)
            if still_open:  # an open incident: this run is no baseline, so the regression is not absorbed
                store.update_summaries(comparison.run.id, {name: {"eligible": False} for name in still_open})
    except Exception as exc:  # noqa: BLE001 - the run itself succeeded
        text = exc.one_line() if isinstance(exc, EvalloopError) else str(exc)
        notices.append(f"failure memories not stored: {text}")
        return []
    for item in learned:
        if item.error:
            notices.append(f"failure memory for {item.scorer} not stored: {item.error}")
            continue
        what = f"failure memory {item.memory_id} for {item.scorer} (suite:{suite}, status:{item.state})"
        verb = VERBS.get(item.action, item.action)
        notices.append(f"{verb} {what}" if item.action in ("opened", "reopened", "updated", "resolved")
                       else f"{what}: {verb}")
        if item.chronic and item.action in ("opened", "reopened"):
            notices.append(f"{item.scorer}: {len(item.chronic)} case(s) failed before this regression too "
                           f"(chronic, kept apart from it): {', '.join(item.chronic[:5])}")
    return learned


def run_suite(
    suite: str | Path | Suite,
    options: RunOptions | None = None,
    *,
    settings: Settings | None = None,
    registry: Registry | None = None,
    store: HistoryStore | None = None,
    services: Services | None = None,
    progress: Callable[[int], None] | None = None,
    on_start: Callable[[PreparedRun], None] | None = None,
) -> RunReport:
    """Run one suite with ``options`` and compare it with its rolling baseline (:func:`arun_suite`)."""
    return asyncio.run(arun_suite(suite, options, settings=settings, registry=registry, store=store,
                                  services=services, progress=progress, on_start=on_start))
