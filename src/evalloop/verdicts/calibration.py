"""Judge-noise calibration: grade the same outputs several times and size thresholds to the noise.

The target answers every case once; each ``llm_judge`` scorer then grades those same outputs
``repeats`` times (each repeat is a distinct cache epoch, apart from the epochs of runs, so
the calls are real and a second calibration is replayed from the cache). ``llm_operation``
scorers repeat the target call too, since the operation is what varies. Heuristic scorers are
deterministic: for them only the minimal detectable drop of a pass/fail scorer at the suite's
size is computed. Results are stored in the ``calibrations`` table.
"""

from __future__ import annotations

import asyncio
import itertools
import math
from collections.abc import Awaitable
from typing import TypeVar

import numpy as np
from pydantic import BaseModel

from evalloop.errors import EvalloopError
from evalloop.history.models import CalibrationRecord
from evalloop.history.store import HistoryStore, dumps
from evalloop.llm.cache import current_epoch
from evalloop.llm.errors import is_case_level
from evalloop.policy import VerdictPolicy
from evalloop.run.context import CaseContext, Services
from evalloop.run.runner import BoundScorer, PreparedRun
from evalloop.score import Score
from evalloop.suites.models import Case
from evalloop.verdicts import power
from evalloop.verdicts.drop import minimal_detectable_drop

T = TypeVar("T")

CALIBRATION_EPOCH = 1_000_000  # cache epochs of calibration repeats, apart from run epochs


class ScorerCalibration(BaseModel):
    """One scorer's calibration, or why there is none."""

    scorer: str
    kind: str
    threshold: float
    calibration: power.Calibration | None = None
    minimal_detectable_drop: float | None = None
    note: str = ""


async def _call_target(prepared: PreparedRun, services: Services, case: Case, epoch: int) -> tuple[bool, object]:
    ctx = CaseContext(prepared.suite.name, "calibration", case, epoch, services)
    token = current_epoch.set(CALIBRATION_EPOCH + epoch)
    try:
        return True, await prepared.target(case.input, ctx)
    except EvalloopError as exc:
        if not is_case_level(exc):  # no connection, a rejected key, a replay miss: stop
            raise
        return False, None
    except Exception:  # noqa: BLE001 - a case the target cannot answer is left out
        return False, None
    finally:
        current_epoch.reset(token)


async def _grade(bound: BoundScorer, services: Services, suite: str, case: Case, output: object, epoch: int) -> Score:
    ctx = CaseContext(suite, "calibration", case, epoch, services)
    token = current_epoch.set(CALIBRATION_EPOCH + epoch)
    try:
        return await bound.score(case, output, ctx)
    finally:
        current_epoch.reset(token)


async def _repeat(prepared: PreparedRun, services: Services, bound: BoundScorer, case: Case, output: object,
                  r: int) -> Score | None:
    """Repeat ``r`` of one scorer on one case (an ``llm_operation`` asks the target again)."""
    if bound.kind.value == "llm_operation" and r > 0:
        ok, output = await _call_target(prepared, services, case, r)
        if not ok:
            return None
    return await _grade(bound, services, prepared.suite.name, case, output, r)


async def acalibrate(
    prepared: PreparedRun, services: Services, *, repeats: int = 5, false_alarm_rate: float = 0.05,
    window: int = 5, limit: int | None = None, concurrency: int = 16,
) -> list[ScorerCalibration]:
    """Calibrate every scorer of a prepared suite (see the module docstring)."""
    cases = [c for c in itertools.islice(prepared.suite.iter_cases(), limit)
             if not any(c.expects_fail(b.name) for b in prepared.scorers)]
    gate = asyncio.Semaphore(concurrency)

    async def bounded(coro: Awaitable[T]) -> T:
        async with gate:
            return await coro

    first = await asyncio.gather(*(bounded(_call_target(prepared, services, c, 0)) for c in cases))
    answered = [(c, out) for c, (ok, out) in zip(cases, first, strict=True) if ok]
    results = []
    for bound in prepared.scorers:
        result = ScorerCalibration(scorer=bound.name, kind=bound.kind.value, threshold=bound.threshold)
        results.append(result)
        if bound.kind.value == "heuristic":
            scores = await asyncio.gather(*(_grade(bound, services, prepared.suite.name, c, o, 0)
                                            for c, o in answered))
            values = [s.value for s in scores if not (s.errored or s.skipped)]
            mean = float(np.mean(values)) if values else math.nan
            binary = bool(values) and all(v in (0.0, 1.0) for v in values)
            if binary:  # the target may vary from run to run: a coin at the mean is the pessimistic case
                result.minimal_detectable_drop = minimal_detectable_drop(
                    len(values), mean, mean * (1 - mean), window, VerdictPolicy(**bound.policy), binary=True)
                result.note = "deterministic pass/fail scorer: no judge noise to measure"
            else:
                result.note = "deterministic scorer: no judge noise to measure"
            continue
        matrix: list[list[float | None]] = [[None] * repeats for _ in answered]
        skipped = ""
        for r in range(repeats):
            grades = await asyncio.gather(*(bounded(_repeat(prepared, services, bound, c, o, r))
                                            for c, o in answered))
            for i, score in enumerate(grades):
                if score is None:
                    continue
                if score.skipped:
                    skipped = score.message
                elif not score.errored:
                    matrix[i][r] = score.value
        rows = [[v for v in row if v is not None] for row in matrix if None not in row]  # graded in every repeat
        if skipped and not rows:
            result.note = skipped
            continue
        if not rows:
            result.note = "no case was graded in every repeat"
            continue
        result.calibration = power.calibrate(rows, false_alarm_rate=false_alarm_rate, window=window,
                                             binary=bound.spec.binary or None)
        # under the verdict rule in force (its floor included), at this suite's size and noise
        cal = result.calibration
        mdd = minimal_detectable_drop(cal.n_cases, cal.mean, cal.noise_sd**2, window,
                                      VerdictPolicy(**bound.policy), binary=cal.binary)
        result.calibration = cal.model_copy(update={"minimal_detectable_drop": mdd})
        result.minimal_detectable_drop = mdd
    return results


def store_calibrations(store: HistoryStore, suite: str, results: list[ScorerCalibration]) -> None:
    """Keep each measured calibration beside the history."""
    from sqlalchemy import insert

    rows = [CalibrationRecord(
        suite=suite, scorer=r.scorer, kind=r.kind, repeats=c.repeats, n_cases=c.n_cases,
        mean=c.mean, noise_sd=c.noise_sd, false_alarm_rate=c.false_alarm_rate,
        suggested_threshold=c.suggested_threshold, minimal_detectable_drop=c.minimal_detectable_drop,
        per_case_variance=dumps(c.per_case_variance)).model_dump(exclude={"id"})
        for r in results if (c := r.calibration) is not None]
    if rows:
        with store.engine.begin() as conn:
            conn.execute(insert(CalibrationRecord.__table__), rows)
