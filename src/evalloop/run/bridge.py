"""Re-grading earlier runs' stored outputs with the current scorers: the bridge over a measurement change.

Given the runs to bridge and, for each, the scorers whose measurement changed (the plan is
:mod:`evalloop.verdicts.identity`'s), each run's stored outputs are graded again by this run's
bound scorers — a judge with its new model or rubric — exactly as the runner grades a live output
(the same context, controls, errored limit and score vector), and stored as a bridge run
(:mod:`evalloop.history.bridges`). A case the target failed keeps its failure (a real 0, or
errored for the infrastructure's); a case no longer in the suite is left out; the cases are taken
from the suite as it is now. What the judge calls cost is counted on the bridge run and returned.
The bridges run under the run's cost budget (``--max-cost``), apart from the run's own spend.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from evalloop.errors import EvalloopError
from evalloop.history import bridges
from evalloop.history.details import json_object, jsonable
from evalloop.history.eligibility import RULE, RULE_KEY, accepted, base_fingerprint, eligible_now
from evalloop.history.identity import parse, scorer_list, stable_hash
from evalloop.history.models import Run, RunStatus, ScorerSummary, ScoreVector
from evalloop.history.store import HistoryStore, dumps
from evalloop.llm.budget import budget_scope
from evalloop.llm.errors import BudgetExceeded
from evalloop.llm.usage import UsageTotals, usage_scope
from evalloop.run.bound import BoundScorer
from evalloop.run.context import CaseContext, Services
from evalloop.run.grades import ScorerResult, _Grades
from evalloop.score import Score
from evalloop.scoring.scorevec import ids_digest
from evalloop.suites.models import Case, Suite

BridgeRecord = bridges.BridgeRecord
_STOPS = ("the cost budget", "re-grading failed")


async def bridge_runs(store: HistoryStore, suite: Suite, scorers: Sequence[BoundScorer],
                      fingerprint: Mapping[str, Any], measurements: Mapping[str, str],
                      plan: Sequence[tuple[Run, Sequence[str]]], *, services: Services | None = None,
                      concurrency: int = 16, errored_limit: float = 0.2,
                      max_cost: float | None = None) -> list[BridgeRecord]:
    """Bridge each ``(run, scorer names)`` of ``plan`` (newest first) to this run's ``measurements``
    (scorer → hash) with its bound ``scorers``; ``fingerprint`` is this run's. Once the cost budget
    is spent, the remaining runs are not bridged (each says so)."""
    services = services or Services()
    bound = {b.name: b for b in scorers}
    cases: dict[str, Case] | None = None
    out: list[BridgeRecord] = []
    stopped: str | None = None
    with budget_scope(max_cost):
        for original, names in plan:
            chosen = [bound[n] for n in names if n in bound and n in measurements]
            if not chosen:
                continue
            if stopped is not None:
                out.append(BridgeRecord(run=original.id, scorers=[b.name for b in chosen], reason=stopped))
                continue
            if cases is None:
                cases = {c.id: c for c in suite.iter_cases()}
            record = await _bridge_one(store, suite.name, cases, chosen, fingerprint, measurements, original,
                                       services, concurrency, errored_limit)
            out.append(record)
            if record.reason.startswith(_STOPS):  # the next run would fail alike: none is tried
                stopped = f"not tried: a bridge before it stopped ({record.reason})"
    return out


async def _bridge_one(store: HistoryStore, suite: str, cases: Mapping[str, Case], chosen: list[BoundScorer],
                      fingerprint: Mapping[str, Any], measurements: Mapping[str, str], original: Run,
                      services: Services, concurrency: int, errored_limit: float) -> BridgeRecord:
    names = [b.name for b in chosen]
    record = BridgeRecord(run=original.id, scorers=names)
    stored = bridges.stored_outputs(store, original)
    if isinstance(stored, str):
        record.reason = stored
        return record
    rows = [(result, output) for result, output in stored if result.case_id in cases]
    if not rows:
        record.reason = "none of its cases is in the suite any more"
        return record
    ids = list(dict.fromkeys(result.case_id for result, _ in rows))
    position = {case_id: i for i, case_id in enumerate(ids)}
    bridge = bridges.bridge_id(original.id, {n: measurements[n] for n in names})
    grades = {b.name: _Grades(len(ids)) for b in chosen}
    scores: list[dict[str, Any]] = []
    gate = asyncio.Semaphore(max(1, concurrency))

    async def grade(result: Any, output: Any) -> None:
        case = cases[result.case_id]
        async with gate:
            ctx = CaseContext(suite, bridge, case, result.epoch, services)
            for b in chosen:
                if case.fixed_output and not case.tests_scorer(b.name):
                    continue  # a control with a fixed output is graded only by the scorers it tests (as the runner)
                score = await _grade(b, case, result, case.output if case.fixed_output else output, ctx)
                grades[b.name].add(position[case.id], score, case.expect != "pass" and case.expects_fail(b.name),
                                   tests_scorer=case.fixed_output)
                scores.append({"run_id": bridge, "case_id": case.id, "epoch": result.epoch, "scorer": b.name,
                               "value": score.value, "errored": score.errored, "skipped": score.skipped,
                               "message": score.message, "meta": dumps(score.metadata) if score.metadata else None})

    with usage_scope() as usage:
        try:
            await asyncio.gather(*(grade(result, output) for result, output in rows))
        except BudgetExceeded:
            record.reason = "the cost budget (--max-cost) was spent while it was re-graded"
            _count(record, usage)
            return record
        except EvalloopError as exc:  # the judge cannot be reached, an unknown model, ...: the run stands
            record.reason = f"re-grading failed: {exc.one_line()}"
            _count(record, usage)
            return record
    _count(record, usage)
    results = {b.name: grades[b.name].result(b, errored_limit, ids) for b in chosen}
    run = _bridge_run(original, bridge, fingerprint, results, usage)
    summaries = [_summary(store, original, run, r, measurements[name]) for name, r in results.items()]
    digest = ids_digest(ids)
    vectors = [ScoreVector(run_id=bridge, scorer=name, digest=digest, n=len(ids),
                           data=r.vector.astype("<f8").tobytes()) for name, r in results.items()]
    bridges.write_bridge(store, run, summaries, vectors, scores)
    record.bridge = bridge
    return record


async def _grade(bound: BoundScorer, case: Case, result: Any, output: Any, ctx: CaseContext) -> Score:
    """A stored result graded again: a target failure stays one (a real 0; errored when it was the
    infrastructure's), an output is graded by the scorer as a live one is."""
    if result.error is not None:
        return Score.infrastructure(result.error) if result.failure == "infra" else Score.target_failure(result.error)
    return await bound.score(case, output, ctx)


def _count(record: BridgeRecord, usage: UsageTotals) -> None:
    record.llm_calls, record.cache_hits, record.cost_usd = usage.calls, usage.cache_hits, usage.cost_usd


def _bridge_run(original: Run, bridge: str, fingerprint: Mapping[str, Any], results: Mapping[str, ScorerResult],
                usage: UsageTotals) -> Run:
    """The bridge's run row: the original's times, product and counts; this run's measurement of
    the re-graded scorers in its fingerprint; what the re-grading used."""
    before = parse(original.fingerprint)
    now = {e.get("name"): e for e in fingerprint.get("scorers") or [] if isinstance(e, dict)}
    entries = [now.get(e.get("name"), e) if isinstance(e, dict) and e.get("name") in results else e
               for e in scorer_list(before)]
    measured = {**before, "scorers": entries}
    invalid = [r.invalid for r in results.values() if r.invalid]
    return Run(
        id=bridge, suite=original.suite, status=RunStatus.COMPLETED, valid=bool(original.valid) and not invalid,
        invalid_reason="; ".join(invalid) or original.invalid_reason, partial=original.partial,
        started_at=original.started_at, ended_at=original.ended_at, code_version=original.code_version,
        fingerprint=jsonable(measured), fingerprint_hash=stable_hash(measured),
        base_fingerprint=stable_hash(base_fingerprint(measured)), product_fingerprint=original.product_fingerprint,
        bridge_of=original.id, n_cases=original.n_cases, epochs=original.epochs, case_errors=original.case_errors,
        target_failures=original.target_failures, infra_failures=original.infra_failures,
        cost_usd=usage.cost_usd, input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
        llm_calls=usage.calls, cache_hits=usage.cache_hits, llm_retries=usage.retries,
        cache_write_tokens=usage.cache_write_tokens, cache_read_tokens=usage.cache_read_tokens,
        batched_calls=usage.batched, notes=jsonable({"bridge_of": original.id, "scorers": sorted(results)}),
        origin=original.origin,
    )


def _summary(store: HistoryStore, original: Run, run: Run, result: ScorerResult, measurement: str) -> ScorerSummary:
    """A re-graded scorer's summary: eligible as its original was (it is in a baseline window), if
    its grades are valid; an acceptance of the original travels with it."""
    summary = result.summary(run.id, measurement)
    details = json_object(summary.details)
    details["bridge_of"] = original.id
    details[RULE_KEY] = RULE  # judged now, by the current eligibility rule
    found = accepted(store.summaries(original.id).get(result.scorer) or summary)
    if found is not None:
        details["accepted"] = jsonable(found)
        summary.accepted = True
    summary.details = details
    summary.eligible = eligible_now(run, summary, None) and result.invalid is None
    return summary
