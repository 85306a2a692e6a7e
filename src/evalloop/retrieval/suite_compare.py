"""Side by side: one suite run against several targets, with paired significance per scorer.

Every target runs the same cases through the ordinary pipeline, as suite ``<suite>.<target>``.
By default the runs go to a throw-away history; with ``record=True`` they are stored in the
project history, so every target keeps its own rolling baseline, verdicts and failure memories. Differences are
tested against the first target with a paired permutation test over per-case scores; when the cases carry
scopes (one conversation each, as LoCoMo's), the test flips whole scopes and the intervals resample them.
With ``epochs`` each case runs that many times and every mean also gets its standard deviation over
epochs (mean ± std, as the mem0 table reports J); with ``limit`` a scoped suite keeps whole
conversations drawn at random (``seed``) until they hold ``limit`` cases, not its first cases.
"""

from __future__ import annotations

import asyncio
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from evalloop import validation
from evalloop.config import Settings
from evalloop.errors import TargetError
from evalloop.history.store import HistoryStore
from evalloop.loop.pipeline import arun_suite
from evalloop.report.strata import StrataReport, latency_summary, strata_means
from evalloop.retrieval.answers import FULL_CONTEXT
from evalloop.retrieval.retrievers import parse_spec, retriever_factory
from evalloop.retrieval.suite_targets import record_target_stats, target_stats
from evalloop.run.options import RunOptions
from evalloop.scoring.registry import Registry, discover
from evalloop.suites.lookup import find_suite
from evalloop.suites.models import Suite, TargetRef

#: the built-in targets of retrieval suites (a ref starting so is aimed at a retriever by name)
SUITE_TARGETS = ("evalloop.retrieval.suite_targets:", "evalloop.retrieval.answer_target:")


class Difference(BaseModel):
    """A target's mean minus the reference target's, over the cases both graded."""

    diff: float
    p_value: float | None = Field(description="two-sided paired permutation test; None without stats")
    n: int
    test: str = Field(default="paired permutation", description="which test: by case, or by scope "
                      "(whole conversations flipped) when the suite's cases carry scopes")


class TargetResult(BaseModel):
    """One target's run: means per scorer, measurements, strata, and differences."""

    target: str
    run_id: str
    suite: str
    means: dict[str, float | None]
    intervals: dict[str, tuple[float, float]] = Field(
        default_factory=dict, description="95% bootstrap CI of each mean (by scope when scoped)")
    stats: dict[str, Any] = Field(default_factory=dict)
    strata: StrataReport
    vs_reference: dict[str, Difference] = Field(default_factory=dict)
    verdicts: dict[str, str] = Field(default_factory=dict, description="against its own baseline")
    spread: dict[str, tuple[float, float, int]] = Field(
        default_factory=dict, description="mean and std (n − 1) of the per-epoch means, and the epochs")


class TargetComparison(BaseModel):
    """The table ``evalloop compare-targets`` prints."""

    suite: str
    n_cases: int
    scorers: list[str]
    reference: str
    results: list[TargetResult]
    sample: str | None = Field(default=None, description="which conversations --limit kept, and the seed")


def _paired_p(x: Sequence[float], y: Sequence[float], clusters: Sequence[str] | None = None) -> float:
    """Two-sided paired permutation p-value, flipping whole clusters (scopes) when given."""
    from evalloop.verdicts.stats import paired_permutation_test

    return float(paired_permutation_test(x, y, alternative="two-sided", clusters=clusters).p_value)


def case_scopes(suite: Suite) -> dict[str, str]:
    """``case id -> scope`` for a suite whose cases carry a ``scope:<id>`` tag (else empty): the
    clusters its intervals and paired tests resample."""
    from evalloop.suites.models import scope_of

    out: dict[str, str] = {}
    for case in suite.iter_cases():
        scope = scope_of(case.tags)
        if scope is not None:
            out[case.id] = scope
    return out


def interval(values: dict[str, float], scopes: dict[str, str]) -> tuple[float, float] | None:
    """A 95% bootstrap CI of the mean of per-case values: whole scopes resampled when every case
    has one (the questions of one conversation are not independent), else cases; as a run's
    verdict computes it (:func:`evalloop.verdicts.drop.mean_interval`)."""
    import numpy as np

    from evalloop.scoring.scorevec import scope_codes
    from evalloop.verdicts.drop import mean_interval, scope_groups

    ids = sorted(values)
    codes = scope_codes(ids, scopes)
    groups = scope_groups(codes, np.ones(len(ids), dtype=bool))
    ci = mean_interval(np.array([values[c] for c in ids]), groups, level=0.95, resamples=4000, seed=0)
    return None if ci is None else (ci.low, ci.high)


def _slug(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", label.split(":")[-1]).strip("-") or "target"


def _with_target(suite: Suite, label: str) -> tuple[Suite, dict[str, Any]]:
    """The suite aimed at ``label``: a retriever for the built-in suite targets, else a ref."""
    if suite.target.ref.startswith(SUITE_TARGETS):
        spec, options = parse_spec(label)
        options = {**suite.target.params.get("options", {}), **options} if options else {}
        try:  # an unknown retriever or option fails here, before any run
            if spec != FULL_CONTEXT or not suite.target.ref.endswith(":AnswerTarget"):
                retriever_factory(spec, options=options)()
        except (TypeError, ValueError) as exc:
            errors = exc.errors() if isinstance(exc, ValidationError) else []
            why = (f"option '{validation.location(errors[0])}': {validation.message(errors[0])}" if errors
                   else str(exc).splitlines()[0])
            raise TargetError(f"target {label!r}: {why}",
                              hint="options are the retriever's keyword arguments, e.g. "
                                   "memory[vector_weight=0] or hybrid[fusion=weighted]") from None
        return suite, {"retriever": spec, **({"options": options} if options else {})}
    if ":" not in label:
        raise TargetError(f"'{label}' is not a target for suite '{suite.name}'",
                          where=str(suite.path or suite.name),
                          hint=f"its target is {suite.target.ref}; give --target module:function")
    return suite.model_copy(update={"target": TargetRef(ref=label)}), {}


async def acompare_targets(
    suite: str | Path | Suite, targets: Sequence[str], *, settings: Settings,
    registry: Registry | None = None, record: bool = False, limit: int | None = None,
    epochs: int | None = None, seed: int = 0,
) -> TargetComparison:
    """Run ``suite`` once per target and tabulate means, strata, costs and significance."""
    from evalloop.retrieval.card import epoch_spread, sample_scopes

    if not targets:
        raise TargetError("no target to compare", hint="give --target at least once")
    base = suite if isinstance(suite, Suite) else find_suite(str(suite), settings.project_dir)
    registry = registry or discover(settings.project_dir)
    aimed_at = [_with_target(base, label) for label in targets]
    scopes = case_scopes(base)
    select, sample = None, None
    if limit is not None and scopes:  # whole conversations, drawn at random, never the first cases
        chosen = sample_scopes(scopes, limit, seed)
        select = lambda case: scopes.get(case.id) in chosen  # noqa: E731
        limit = None
        sample = (f"{len(chosen)} of {len(set(scopes.values()))} conversations drawn (seed {seed}): "
                  f"{', '.join(sorted(chosen))}")
    with tempfile.TemporaryDirectory(prefix="evalloop-compare-") as tmp:
        run_settings = settings if record else settings.model_copy(update={
            "history_url": f"sqlite:///{Path(tmp) / 'compare.db'}", "run_log": False, "learn": False})
        store = HistoryStore(run_settings.database_url)
        results: list[TargetResult] = []
        per_case: list[dict[str, dict[str, float]]] = []
        for label, (aimed, params) in zip(targets, aimed_at, strict=True):
            ref = TargetRef(ref=aimed.target.ref, params={**aimed.target.params, **params})
            named = aimed.model_copy(update={"name": f"{base.name}.{_slug(label)}", "target": ref})
            report = await arun_suite(named, RunOptions(limit=limit, epochs=epochs, select=select),
                                      settings=run_settings, registry=registry, store=store)
            run_id = report.executed.run.id
            stats = target_stats(report.prepared.target) or {}
            stats.update({f"runner_{k}": v for k, v in latency_summary(store, run_id).items()})
            record_target_stats(store, run_id, stats)
            scorers = [b.name for b in report.prepared.scorers]
            per_case.append({s: store.case_scores(run_id, s) for s in scorers})
            results.append(TargetResult(
                target=label, run_id=run_id, suite=named.name,
                means={s: report.executed.summaries[s].mean for s in scorers}, stats=stats,
                verdicts={c.scorer: c.verdict for c in report.comparison.scorers},
                strata=strata_means(store, run_id, order=scorers),
                spread=epoch_spread(store.score_rows(run_id), scorers) if (epochs or 1) > 1 else {}))
        if not record:
            store.engine.dispose()
    scorers = base.scorer_labels
    for result, cases in zip(results, per_case, strict=True):
        for s in scorers:
            if (ci := interval(cases[s], scopes)) is not None:
                result.intervals[s] = ci
    for result, cases in zip(results[1:], per_case[1:], strict=True):
        for s in scorers:
            common = sorted(set(cases[s]) & set(per_case[0][s]))
            if not common:
                continue
            x = [cases[s][c] for c in common]
            y = [per_case[0][s][c] for c in common]
            clusters = [scopes[c] for c in common] if all(c in scopes for c in common) else None
            result.vs_reference[s] = Difference(
                diff=sum(x) / len(x) - sum(y) / len(y), p_value=_paired_p(x, y, clusters),
                n=len(common), test="paired permutation by scope" if clusters else "paired permutation")
    return TargetComparison(suite=base.name, n_cases=results[0].strata.n if results else 0,
                            scorers=scorers, reference=targets[0], results=results, sample=sample)


def compare_targets(suite: str | Path | Suite, targets: Sequence[str], **kwargs: Any) -> TargetComparison:
    """Synchronous :func:`acompare_targets`."""
    return asyncio.run(acompare_targets(suite, targets, **kwargs))
