"""Does the loop help? One suite run as variants side by side, with paired tests against the first.

A variant is ``name:key=value,key=value``. ``inject=off|ids|full`` chooses what of the suite's
open failure memories enters the prompt (nothing, the failing case ids only, or the full
feedback text); any other key is a target parameter (``similar_at=0.9``), value parsed as YAML.
The default variants are ``none:inject=off``, ``ids:inject=ids`` and ``full:inject=full`` — the
ablation that says whether the feedback text, not the mere presence of a memory, is what helps.

Every variant runs the same cases through the ordinary pipeline into a throw-away history, with
learning off: checking never writes, updates or resolves a memory. Differences from the first
variant are paired permutation tests over per-case scores.

By default only the suite's **held-out** cases are run (:attr:`~evalloop.suites.models.Suite.holdout`):
cases no lesson was built from, so a gain is generalisation, not recall of the cases a memory
shows. ``on="all"`` runs every case; its figures include the learn cases and say so.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, Field

from evalloop.config import Settings
from evalloop.errors import ConfigError
from evalloop.history.details import JSONValue, run_fingerprint
from evalloop.history.store import HistoryStore
from evalloop.learning import incidents as learning
from evalloop.learning import injection
from evalloop.loop.pipeline import arun_suite
from evalloop.run.options import RunOptions
from evalloop.scoring.registry import Registry, discover
from evalloop.suites.lookup import find_suite
from evalloop.suites.models import Suite, TargetRef

DEFAULT_VARIANTS = ("none:inject=off", "ids:inject=ids", "full:inject=full")
ALPHA = 0.05
On = Literal["held-out", "all"]


class Variant(BaseModel):
    """One way to run the suite."""

    name: str
    inject: str = "full"
    params: dict[str, Any] = Field(default_factory=dict)


def parse_variant(spec: str) -> Variant:
    """``name:key=value,...`` → a Variant; a malformed spec is one clear error."""
    name, _, rest = spec.partition(":")
    if not name.strip():
        raise ConfigError(f"variant {spec!r} has no name", where="--variant",
                          hint="write name:key=value, e.g. full:inject=full or strict:similar_at=0.9")
    variant = Variant(name=name.strip())
    for part in filter(None, (p.strip() for p in rest.split(","))):
        key, eq, value = part.partition("=")
        if not eq or not key.strip():
            raise ConfigError(f"variant {spec!r}: {part!r} is not key=value", where="--variant",
                              hint="write name:key=value, e.g. strict:similar_at=0.9")
        key = key.strip()
        if key == "inject":
            if value not in ("off", "ids", "full"):
                raise ConfigError(f"variant {spec!r}: inject must be off, ids or full", where="--variant")
            variant.inject = value
        else:
            variant.params[key] = yaml.safe_load(value)
    return variant


class VariantResult(BaseModel):
    """One variant's run: means per scorer and the paired difference from the reference."""

    variant: str
    inject: str
    params: dict[str, Any]
    injected_memories: list[str]
    means: dict[str, float | None]
    diff: dict[str, float | None] = Field(default_factory=dict)
    p_value: dict[str, float | None] = Field(default_factory=dict)
    n_paired: dict[str, int] = Field(default_factory=dict)
    seconds: float = Field(0.0, description="wall time of the variant's run, memory reading included")
    cost_usd: float = Field(0.0, description="what the variant's LLM calls cost")

    def significant(self, scorer: str, alpha: float = ALPHA) -> bool:
        p, d = self.p_value.get(scorer), self.diff.get(scorer)
        return p is not None and d is not None and p < alpha and d > 0


class LearnCheck(BaseModel):
    """The table ``evalloop learn check`` prints."""

    suite: str
    n_cases: int
    on: On = "held-out"
    held_out: int = Field(0, description="held-out cases among those run")
    split: str = ""
    scorers: list[str]
    open_memories: list[str]
    reference: str
    results: list[VariantResult]
    mechanics: bool = Field(False, description="the target was a reference operation on the local engine: "
                                               "the result checks the loop's mechanics and claims nothing")
    note: str = ""

    def claim(self) -> str:
        """What the figures may be read as (one line for the terminal and the docs)."""
        return self.note or ("a gain on held-out cases: the lessons of the learn cases helped on cases they never show"
                             if self.on == "held-out" else "a gain on all cases: recall and generalisation together")


MECHANICS = ("mechanics check, no claim: the local reference engine calls no model; it refits the one "
             "similarity cut a broken decide loses from the lesson's stored corrections and never reads its "
             "text, so a gain shows that the loop's mechanics work (a lesson is stored, found and handed to "
             "the target), not that a model generalises from a lesson (run with --engine llm for that)")


def local_reference(fingerprint: str | Mapping[str, JSONValue] | None) -> bool:
    """Whether a run's target was a shipped reference operation on the local engine (no model)."""
    target = run_fingerprint(fingerprint).get("target_fingerprint")
    return isinstance(target, dict) and bool(target.get("operation")) and target.get("engine") == "local"


def _paired_p(x: Sequence[float], y: Sequence[float]) -> float | None:
    from evalloop.verdicts.stats import paired_permutation_test

    if all(a == b for a, b in zip(x, y, strict=True)):
        return 1.0
    return float(paired_permutation_test(x, y, alternative="two-sided").p_value)


async def acheck(suite: str | Path | Suite, *, settings: Settings, variants: Sequence[str | Variant] = DEFAULT_VARIANTS,
                 registry: Registry | None = None, limit: int | None = None, engine: str | None = None,
                 model: str | None = None, on: str = "held-out") -> LearnCheck:
    """Run ``suite`` once per variant on the same cases (its held-out part, or ``on="all"``)
    and compare each with the first. ``on`` is checked here (it comes from ``--on``): one of :data:`On`."""
    parsed = [v if isinstance(v, Variant) else parse_variant(v) for v in variants]
    if len({v.name for v in parsed}) != len(parsed):
        raise ConfigError("two variants share a name", where="--variant", hint="give each variant its own name")
    base = suite if isinstance(suite, Suite) else find_suite(str(suite), settings.project_dir)
    registry = registry or discover(settings.project_dir)
    if on not in ("held-out", "all"):
        raise ConfigError(f"--on must be held-out or all, not {on!r}", where="--on")
    held = base.held_out_ids()
    if on == "held-out" and not held:
        raise ConfigError(f"suite '{base.name}' has no held-out case ({base.holdout.describe()})",
                          where=str(base.path or base.name),
                          hint="give the suite a `holdout:` fraction or tags, or check with --on all")
    select = (lambda c: c.id in held) if on == "held-out" else None
    open_ids: list[str] = []
    if settings.memory_url or settings.memory_file.exists():
        adapter = injection.open_adapter(settings)
        try:
            open_ids = [getattr(r, "record", r).id for r in learning.incidents(adapter, base.name)]
        finally:
            injection.close_adapter(adapter)
    results: list[VariantResult] = []
    per_case: list[dict[str, dict[str, float]]] = []
    mechanics = False
    with tempfile.TemporaryDirectory(prefix="evalloop-learn-") as tmp:
        db = f"sqlite:///{Path(tmp) / 'check.db'}"
        store = HistoryStore(db)
        for v in parsed:
            run_settings = settings.model_copy(update={
                "history_url": db, "run_log": False, "learn": False, "inject_failures": v.inject != "off",
                "inject_detail": v.inject if v.inject != "off" else "full"})
            ref = TargetRef(ref=base.target.ref, params={**base.target.params, **v.params})
            started = time.perf_counter()
            report = await arun_suite(base.model_copy(update={"target": ref}),
                                      RunOptions(limit=limit, engine=engine, model=model, select=select),
                                      settings=run_settings, registry=registry, store=store)
            run_id = report.executed.run.id
            mechanics = mechanics or local_reference(report.executed.run.fingerprint)
            names = [b.name for b in report.prepared.scorers]
            per_case.append({s: store.case_scores(run_id, s) for s in names})
            results.append(VariantResult(
                variant=v.name, inject=v.inject, params=v.params,
                injected_memories=[] if v.inject == "off" else open_ids[: settings.inject_limit],
                means={s: report.executed.summaries[s].mean for s in names},
                seconds=time.perf_counter() - started, cost_usd=report.executed.run.cost_usd or 0.0))
        store.engine.dispose()
    scorers = base.scorer_labels
    for result, cases in zip(results, per_case, strict=True):
        for s in scorers:
            common = sorted(set(cases.get(s, {})) & set(per_case[0].get(s, {})))
            if not common:
                continue
            x = [cases[s][c] for c in common]
            y = [per_case[0][s][c] for c in common]
            result.diff[s] = sum(x) / len(x) - sum(y) / len(y)
            result.p_value[s] = _paired_p(x, y)
            result.n_paired[s] = len(common)
    n = len(per_case[0].get(scorers[0], {})) if per_case and scorers else 0
    ran = set(per_case[0].get(scorers[0], {})) if per_case and scorers else set()
    return LearnCheck(suite=base.name, n_cases=n, on=on, held_out=len(ran & held), split=base.holdout.describe(),
                      scorers=scorers, open_memories=open_ids, reference=parsed[0].name, results=results,
                      mechanics=mechanics, note=MECHANICS if mechanics else "")
