"""The scorer registry: the ``@scorer`` decorator, scorer specs, and discovery of scorers.

A scorer is any function ``(input, output, expected, **params) -> Score`` (sync or async).
Parameters after the first three are the scorer's parameters, set per suite; a parameter
named ``ctx`` receives the :class:`ScoringContext` of the run. Discovery covers the built-ins,
``scorers/*.py`` in the project directory, and the ``evalloop.scorers`` entry-point group.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType
from typing import Any

from pydantic import TypeAdapter, ValidationError

from evalloop import validation
from evalloop.errors import ScorerError
from evalloop.score import ScorerKind

BUILTIN_MODULES = ("evalloop.scoring.heuristic", "evalloop.retrieval.scorers")
OPTIONAL_BUILTIN_MODULES = ("evalloop.scoring.llm", "evalloop.scoring.graded", "evalloop.retrieval.answer_scorers")
ENTRY_POINT_GROUP = "evalloop.scorers"
_POSITIONAL = ("input", "output", "expected")


@dataclass(frozen=True)
class ScorerSpec:
    """A registered scorer: its function and what the registry knows about it."""

    name: str
    kind: ScorerKind
    fn: Callable[..., Any]
    threshold: float | None = None
    pass_mark: float = 0.5
    min_score: float | None = None  # the absolute floor; None = the kind's target, 0 = none (a measure)
    description: str = ""
    source: str = "?"
    is_async: bool = False
    wants_ctx: bool = False
    params: tuple[str, ...] = ()
    required_params: tuple[str, ...] = ()
    accepts_any_params: bool = False
    binary: bool = field(default=False)

    @property
    def effective_threshold(self) -> float:
        return self.threshold if self.threshold is not None else self.kind.default_threshold

    def check_params(self, params: Mapping[str, Any], where: str) -> None:
        """Raise ScorerError when a suite passes parameters this scorer does not take."""
        if not self.accepts_any_params:
            unknown = sorted(set(params) - set(self.params))
            if unknown:
                allowed = ", ".join(self.params) or "none"
                raise ScorerError(
                    f"scorer '{self.name}' has no parameter {', '.join(map(repr, unknown))}",
                    where=where,
                    hint=f"its parameters are: {allowed}",
                )
        hints = _param_hints(self.fn)
        for key, value in params.items():
            if key in hints:
                try:
                    TypeAdapter(hints[key]).validate_python(value)
                except ValidationError as exc:
                    raise ScorerError(
                        f"scorer '{self.name}' parameter '{key}': {validation.message(exc.errors()[0])} "
                        f"(got {value!r})",
                        where=where, hint=f"give {key} as {_type_name(hints[key])}",
                    ) from None
        missing = [p for p in self.required_params if p not in params]
        if missing:
            raise ScorerError(
                f"scorer '{self.name}' needs parameter {', '.join(map(repr, missing))}",
                where=where,
                hint=f"add it under the scorer's params: {{{missing[0]}: ...}}",
            )


def _param_hints(fn: Callable[..., Any]) -> dict[str, Any]:
    """The type hints of a scorer's parameters (those that resolve; others are not checked)."""
    import typing

    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # noqa: BLE001 - a hint that does not resolve is simply not checked
        return {}
    return {k: v for k, v in hints.items() if k not in (*_POSITIONAL, "ctx", "return") and v is not Any}


def _type_name(hint: Any) -> str:
    return getattr(hint, "__name__", None) or str(hint).replace("typing.", "")


def scorer(
    name: str | None = None,
    *,
    kind: ScorerKind | str = ScorerKind.HEURISTIC,
    threshold: float | None = None,
    pass_mark: float = 0.5,
    description: str | None = None,
    binary: bool = False,
    min_score: float | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Mark a function as a scorer. Discovery registers every marked function of a module.

    ``threshold`` overrides the kind's default regression threshold (a relative drop, 0..1);
    ``binary`` says the scorer only returns 0 or 1 (pass/fail), which picks exact tests;
    ``min_score`` is its absolute floor (default: the kind's success target, 95 / 80 / 70 %;
    ``0`` for a measurement with no universal target, such as recall@k or token F1).
    """
    try:
        kind = ScorerKind(kind)
    except ValueError:
        valid = ", ".join(k.value for k in ScorerKind)
        raise ScorerError(f"unknown scorer kind {kind!r}", hint=f"use one of: {valid}") from None
    if threshold is not None and not 0.0 < threshold < 1.0:
        raise ScorerError(f"threshold {threshold} is not between 0 and 1 (a relative drop)")

    def mark(fn: Callable[..., Any]) -> Callable[..., Any]:
        # the spec rides on the function (found by getattr when a module is scanned); mypy does
        # not let a function carry an attribute (attr-defined)
        fn.__evalloop_scorer__ = _make_spec(  # type: ignore[attr-defined]
            fn, name or fn.__name__.replace("_", "-"), kind, threshold, pass_mark,
            description, binary, min_score,
        )
        return fn

    return mark


def _make_spec(
    fn: Callable[..., Any], name: str, kind: ScorerKind, threshold: float | None,
    pass_mark: float, description: str | None, binary: bool, min_score: float | None = None,
) -> ScorerSpec:
    sig = inspect.signature(fn)
    names = list(sig.parameters)
    if len(names) < 3 or any(
        sig.parameters[n].kind not in (inspect.Parameter.POSITIONAL_ONLY,
                                       inspect.Parameter.POSITIONAL_OR_KEYWORD)
        for n in names[:3]
    ):
        raise ScorerError(
            f"scorer '{name}' must take (input, output, expected) as its first three parameters",
            where=_source_of(fn),
        )
    rest = [sig.parameters[n] for n in names[3:]]
    params = tuple(p.name for p in rest if p.name != "ctx" and p.kind != p.VAR_KEYWORD)
    required = tuple(
        p.name for p in rest
        if p.name != "ctx" and p.default is p.empty and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
    )
    doc = description if description is not None else (inspect.getdoc(fn) or "").split("\n")[0]
    return ScorerSpec(
        name=name, kind=kind, fn=fn, threshold=threshold, pass_mark=pass_mark, description=doc,
        source=_source_of(fn), is_async=inspect.iscoroutinefunction(fn),
        wants_ctx="ctx" in sig.parameters, params=params, required_params=required,
        accepts_any_params=any(p.kind == p.VAR_KEYWORD for p in rest), binary=binary, min_score=min_score,
    )


def _source_of(fn: Callable[..., Any]) -> str:
    module = getattr(fn, "__module__", "?") or "?"
    if module.startswith("evalloop."):
        return f"builtin ({module})"
    try:
        return f"{Path(inspect.getfile(fn))}"
    except (TypeError, OSError):
        return module


class Registry:
    """Scorers by name. Adding a second scorer under a taken name is an error naming both."""

    def __init__(self) -> None:
        self._specs: dict[str, ScorerSpec] = {}
        #: project scorer files that did not load (with ``discover(strict=False)``)
        self.broken: list[ScorerError] = []

    def add(self, spec: ScorerSpec, source: str | None = None) -> None:
        if source is not None:
            spec = ScorerSpec(**{**spec.__dict__, "source": source})
        old = self._specs.get(spec.name)
        if old is not None and old.fn is not spec.fn:
            raise ScorerError(
                f"scorer name '{spec.name}' is registered twice: by {old.source} and by {spec.source}",
                hint="rename one of them (@scorer(name=...))",
            )
        self._specs[spec.name] = spec

    def add_function(self, fn: Callable[..., Any], source: str | None = None) -> None:
        spec = getattr(fn, "__evalloop_scorer__", None)
        if spec is None:
            spec = _make_spec(fn, fn.__name__.replace("_", "-"), ScorerKind.HEURISTIC, None, 0.5,
                              None, False)
        self.add(spec, source)

    def add_module(self, module: ModuleType, source: str | None = None) -> int:
        found = [v for v in vars(module).values() if hasattr(v, "__evalloop_scorer__")]
        for fn in found:
            self.add(fn.__evalloop_scorer__, source)
        return len(found)

    def get(self, name: str, where: str | None = None) -> ScorerSpec:
        try:
            return self._specs[name]
        except KeyError:
            import difflib

            close = difflib.get_close_matches(name, self._specs, n=1)
            hint = f"did you mean '{close[0]}'? " if close else ""
            if self.broken:  # the scorer may be in a file that did not load: say which
                hint += "it may be defined in " + ", ".join(
                    f"{e.where} (which did not load: {e.what})" for e in self.broken) + "; otherwise "
            raise ScorerError(
                f"unknown scorer '{name}'",
                where=where,
                hint=hint + "see `evalloop scorers list`, or add it under scorers/",
            ) from None

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def __iter__(self):
        return iter(sorted(self._specs.values(), key=lambda s: s.name))

    def __len__(self) -> int:
        return len(self._specs)


def load_project_scorers(registry: Registry, scorers_dir: Path, *, strict: bool = True) -> None:
    """Import every ``scorers/*.py`` file of a project and register its scorers.

    A file that does not import (or clashes) raises, unless ``strict`` is off: then it is kept in
    ``registry.broken`` and only the suites that ask for a scorer it would have defined fail (the
    unknown-scorer line names the file)."""
    if not scorers_dir.is_dir():
        return
    for path in sorted(scorers_dir.glob("*.py")):
        if path.name.startswith("_"):
            continue
        mod_name = f"evalloop_project_scorers.{path.stem}"
        spec = importlib.util.spec_from_file_location(mod_name, path)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        sys.modules[mod_name] = module
        try:
            try:
                spec.loader.exec_module(module)
            except Exception as exc:  # a user's scorer file that does not import
                raise ScorerError(
                    f"cannot import scorer file: {type(exc).__name__}: {exc}",
                    where=str(path),
                    hint="fix the error in that file (run it with python to see the traceback)",
                ) from exc
            registry.add_module(module, source=str(path))
        except ScorerError as exc:
            if strict:
                raise
            registry.broken.append(exc)


#: (what the scan depended on, its entry points): the last scan of the ``evalloop.scorers`` group
_SCANNED: tuple[tuple[tuple[str, int], ...], tuple[Any, ...]] | None = None


def _scorer_entry_points() -> tuple[Any, ...]:
    """The group's entry points. Scanning every installed distribution costs milliseconds per run,
    so the scan is kept until ``sys.path`` or one of its directories changes (installing or
    removing a package adds or removes a ``.dist-info`` folder there)."""
    global _SCANNED
    key = tuple((entry, _mtime_ns(entry)) for entry in sys.path)
    if _SCANNED is None or _SCANNED[0] != key:
        _SCANNED = key, tuple(entry_points(group=ENTRY_POINT_GROUP))
    return _SCANNED[1]


def _mtime_ns(entry: str) -> int:
    try:
        return Path(entry or ".").stat().st_mtime_ns
    except OSError:
        return -1


def load_entry_point_scorers(registry: Registry) -> None:
    """Register scorers that installed packages expose in the ``evalloop.scorers`` group."""
    for ep in _scorer_entry_points():
        try:
            obj = ep.load()
        except Exception as exc:
            raise ScorerError(
                f"entry point '{ep.name}' ({ep.value}) does not load: {exc}",
                hint="reinstall or uninstall the package that provides it",
            ) from exc
        source = f"entry point {ep.name} ({ep.value})"
        if isinstance(obj, ModuleType):
            registry.add_module(obj, source=source)
        else:
            registry.add_function(obj, source=source)


def discover(project_dir: Path | None = None, extra: Iterable[ModuleType] = (), *,
             strict: bool = True) -> Registry:
    """Build a registry of the built-ins, entry points and the project's ``scorers/`` files
    (``strict`` off: a file that does not load is kept in ``registry.broken``, not raised)."""
    registry = Registry()
    for name in BUILTIN_MODULES:
        registry.add_module(importlib.import_module(name))
    for name in OPTIONAL_BUILTIN_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        registry.add_module(module)
    load_entry_point_scorers(registry)
    if project_dir is not None:
        load_project_scorers(registry, project_dir / "scorers", strict=strict)
    for module in extra:
        registry.add_module(module)
    return registry
