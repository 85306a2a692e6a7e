"""Preparing a run: everything checked before it may write anything — the suite's cases
validated, its scorers bound with their thresholds and verdict policy, its target resolved —
and the run's fingerprint (what it tests and how it measures)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

from evalloop.errors import FixtureError
from evalloop.history import identity
from evalloop.history.store import dumps
from evalloop.run.bound import BoundScorer
from evalloop.run.context import Services
from evalloop.run.targets import Target, resolve_target, stable_hash
from evalloop.score import ScorerKind
from evalloop.scoring.registry import Registry
from evalloop.suites.models import Suite


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
