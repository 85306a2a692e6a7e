"""Targets: resolving ``module:function`` to the system under test, and calling it.

A target is any callable ``f(input, **params)``, sync or async; a parameter named ``ctx``
receives the :class:`~evalloop.run.context.CaseContext`. A parameter named ``lessons`` receives
the suite's open failure memories as the run injects them — fenced, within the injection budget,
the text the shipped operations append to their prompts ("" when there is none) — and one named
``lesson_records`` the same memories as plain dicts (built by the learning step:
:class:`evalloop.learning.incident_records.LessonRecord`); both are recorded
under the fingerprint's ``injected`` key. A class is instantiated with the params
and its instance called with the input. A target may describe itself for the run's
fingerprint with a ``fingerprint(params) -> dict`` attribute (prompt hashes, model, config).
How a call runs — threads, the deadline, awaiting what a sync target returns — is
:mod:`evalloop.run.calling`'s; whether a run's calls go to threads, :mod:`evalloop.run.placement`'s.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalloop.errors import TargetError
from evalloop.history.identity import stable_hash
from evalloop.run.calling import call as call_target
from evalloop.run.failures import TargetTimeout

__all__ = ["Target", "TargetTimeout", "resolve_target", "stable_hash"]


@dataclass
class Target:
    """A resolved target, ready to be called with one case's input."""

    ref: str
    fn: Callable[..., Any]
    params: dict[str, Any] = field(default_factory=dict)
    is_async: bool = False
    wants_ctx: bool = False
    threads: bool | None = None  # the suite's target_threads: True, False, or None (adaptive)
    fingerprint: dict[str, Any] = field(default_factory=dict)
    lessons: dict[str, Any] = field(default_factory=dict)  # lessons / lesson_records, for targets naming them

    async def __call__(self, input: Any, ctx: Any = None, *, timeout: float | None = None,
                       in_thread: bool | None = None) -> Any:
        """The target's output for ``input``; :class:`TargetTimeout` past ``timeout`` seconds
        from the call's start. A sync target runs on a daemon thread when ``in_thread`` says so;
        left to itself (a calibration's calls), when the suite asks for threads (``threads``)."""
        if in_thread is None:
            in_thread = self.threads is True
        return await call_target(self.fn, (input,), self._kwargs(ctx), in_thread=in_thread and not self.is_async,
                                 timeout=timeout)

    def start(self, input: Any, ctx: Any = None) -> Any:
        """Call the target in place, on the loop's thread: its output, or an awaitable giving it
        (see :func:`evalloop.run.calling.is_awaitable`). Where a run calls it is
        :class:`evalloop.run.placement.Placement`'s."""
        return self.fn(input, **self._kwargs(ctx))

    def _kwargs(self, ctx: Any) -> dict[str, Any]:
        kwargs = {**self.params, **self.lessons} if self.lessons else self.params
        return {**kwargs, "ctx": ctx} if self.wants_ctx else kwargs


LESSON_PARAMS = ("lessons", "lesson_records")


def _lessons(sig: inspect.Signature | None, params: Mapping[str, Any], services: Any) -> dict[str, Any]:
    """What a target that names ``lessons`` / ``lesson_records`` receives for this run."""
    names = [n for n in LESSON_PARAMS if sig is not None and n in sig.parameters and n not in params]
    if not names:
        return {}
    extras = getattr(services, "extras", None) or {}
    given = {"lessons": extras.get("failure_patterns") or "",
             "lesson_records": [r.model_dump() for r in extras.get("lesson_records") or []]}
    return {n: given[n] for n in names}


#: top-level packages never dropped and re-imported from a project directory: evalloop itself
#: (its tables, registries and settings live in module state; a second copy of them breaks a
#: run, for example from the evalloop repository's root, where ``src/evalloop`` also exists)
_NEVER_FORGET = frozenset({"evalloop"})


def _forget_foreign(module_name: str, project_dir: Path | None) -> None:
    """Drop a cached module of the same name that another project directory loaded.

    Two projects may each have a ``targets.py``; the second one's must not be served from
    the first one's cache. evalloop itself is never dropped: the installed copy is the one
    running, whatever ``./src/evalloop`` holds.
    """
    top = module_name.split(".")[0]
    if project_dir is None or top in _NEVER_FORGET:
        return
    local = [project_dir / f"{top}.py", project_dir / top / "__init__.py",
             project_dir / "src" / f"{top}.py", project_dir / "src" / top / "__init__.py"]
    cached = sys.modules.get(top)
    if cached is None or not any(p.exists() for p in local):
        return
    if Path(getattr(cached, "__file__", "") or "").resolve() not in {p.resolve() for p in local}:
        for name in [m for m in sys.modules if m == top or m.startswith(top + ".")]:
            del sys.modules[name]


def _import(ref: str, project_dir: Path | None) -> Any:
    module_name, sep, attr = ref.partition(":")
    if not sep or not module_name or not attr:
        raise TargetError(f"target '{ref}' is not of the form module:function",
                          hint="write it as package.module:function")
    added = []
    for path in (project_dir, project_dir / "src" if project_dir else None):
        if path is not None and path.is_dir() and str(path) not in sys.path:
            sys.path.insert(0, str(path))
            added.append(str(path))
    _forget_foreign(module_name, project_dir)
    importlib.invalidate_caches()
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name) or exc.name == module_name:
            raise TargetError(f"cannot import module '{module_name}' for target '{ref}'",
                              hint="check the name; project modules are found from the "
                                   "project directory") from None
        raise TargetError(f"target module '{module_name}' fails to import: {exc}",
                          hint="install the missing package") from None
    except Exception as exc:
        raise TargetError(f"target module '{module_name}' raised on import: "
                          f"{type(exc).__name__}: {exc}",
                          hint="run `python -c 'import " + module_name + "'` to see why") from None
    finally:
        for entry in added:
            sys.path.remove(entry)
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise TargetError(f"module '{module_name}' has no attribute '{attr}'",
                              where=getattr(module, "__file__", None),
                              hint="check the target name after the colon") from None
    return obj


def resolve_target(
    ref: str, params: Mapping[str, Any] | None = None, *, project_dir: Path | None = None,
    threads: bool | None = None, services: Any = None,
) -> Target:
    """Resolve a target reference and check its parameters. Raises TargetError."""
    params = dict(params or {})
    obj = _import(ref, project_dir)
    if inspect.isclass(obj):
        try:
            obj = obj(**params)
        except TypeError as exc:
            raise TargetError(f"target class '{ref}' does not accept these params: {exc}") from None
        params = {}
    if not callable(obj):
        raise TargetError(f"target '{ref}' is not callable", hint="point at a function or class")
    call = obj if inspect.isfunction(obj) or inspect.ismethod(obj) else obj.__call__
    try:
        sig = inspect.signature(call)
    except (TypeError, ValueError):
        sig = None
    wants_ctx = bool(sig and "ctx" in sig.parameters)
    lessons = _lessons(sig, params, services)
    if sig is not None:
        try:
            sig.bind(None, **params, **lessons, **({"ctx": None} if wants_ctx else {}))
        except TypeError as exc:
            raise TargetError(f"target '{ref}' cannot be called with input and params "
                              f"{sorted(params)}: {exc}",
                              hint="a target takes the case input first, then its params") from None
    describe = getattr(obj, "fingerprint", None)
    fingerprint: dict[str, Any] = {}
    if callable(describe):
        takes_services = len(inspect.signature(describe).parameters) >= 2
        fingerprint = dict(describe(params, services) if takes_services else describe(params))
    extras = getattr(services, "extras", None) or {}
    if lessons and extras.get("failure_patterns") and "injected" not in fingerprint:
        fingerprint["injected"] = {"memories": list(extras.get("failure_memory_ids") or []),
                                   "sha": stable_hash(extras["failure_patterns"])[:12]}
    return Target(
        ref=ref, fn=obj, params=params, is_async=inspect.iscoroutinefunction(call),
        wants_ctx=wants_ctx, threads=threads, fingerprint=fingerprint, lessons=lessons,
    )


