"""A scorer bound to one suite's use of it, and grading one output with it.

A sync scorer is called in place and its Score returned as it is; an async scorer, or a sync one
that returns a coroutine, gives a coroutine to await. A scorer that raises gives an *errored*
score (one line, credentials redacted); an evalloop error that is not one case's stops the run.

With a deadline (the scorer's own ``timeout:`` in the suite, else the suite's ``timeout``) a
grading past it is an *errored* score, ``scorer NAME timed out after N s``, and the run goes on:
an async scorer's awaits are cut; a sync scorer runs on one of evalloop's daemon threads
(:mod:`evalloop.run.calling`), which is abandoned at the deadline, never joined, and never holds
the process at exit.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from evalloop.errors import EvalloopError
from evalloop.llm.errors import is_case_level
from evalloop.redact import redact_text
from evalloop.run.calling import call
from evalloop.run.context import CaseContext
from evalloop.run.failures import TargetTimeout
from evalloop.score import Score, ScorerKind, coerce_score, scorer_failure
from evalloop.scoring.registry import ScorerSpec
from evalloop.suites.models import Case

__all__ = ["BoundScorer"]


@dataclass(frozen=True)
class BoundScorer:
    """A registered scorer with the parameters and threshold one suite gives it."""

    spec: ScorerSpec
    params: dict[str, Any]
    threshold: float
    pass_mark: float
    policy: dict[str, Any] = field(default_factory=dict)
    label: str | None = None
    timeout: float | None = None  # seconds a grading may take (None: no deadline)

    @property
    def name(self) -> str:
        """The name results are stored under: the suite's label for this use, else the scorer's."""
        return self.label or self.spec.name

    @property
    def kind(self) -> ScorerKind:
        return self.spec.kind

    async def score(self, case: Case, output: Any, ctx: CaseContext | None) -> Score:
        """This scorer's grade of one output (an errored score when the scorer failed)."""
        graded = self.grade(case, output, ctx)
        return graded if isinstance(graded, Score) else await graded

    def grade(self, case: Case, output: Any, ctx: CaseContext | None) -> Score | Coroutine[Any, Any, Score]:
        """The grade of a sync scorer, computed in place; a coroutine giving it when the scorer is
        async or returned an awaitable. ``ctx`` may be None for a scorer that does not take one."""
        if self.timeout is not None:
            return self._within_deadline(case, output, ctx, self.timeout)
        try:
            raw = self._call(case, output, ctx)
            if type(raw) is Score:
                return raw
            if self.spec.is_async or asyncio.iscoroutine(raw):
                return self._awaited(raw, case)
            return coerce_score(raw)
        except Exception as exc:
            return self._failed(exc, case)

    def _call(self, case: Case, output: Any, ctx: CaseContext | None) -> Any:
        if self.spec.wants_ctx:
            return self.spec.fn(case.input, output, case.expected, **{**self.params, "ctx": ctx})
        return self.spec.fn(case.input, output, case.expected, **self.params)

    async def _within_deadline(self, case: Case, output: Any, ctx: CaseContext | None, timeout: float) -> Score:
        kwargs = {**self.params, "ctx": ctx} if self.spec.wants_ctx else self.params
        try:
            raw = await call(self.spec.fn, (case.input, output, case.expected), kwargs,
                             in_thread=not self.spec.is_async, timeout=timeout)
            return raw if type(raw) is Score else coerce_score(raw)
        except TargetTimeout:  # calling's deadline, here the scorer's
            return Score.error(f"scorer {self.name} timed out after {timeout:g} s")
        except Exception as exc:
            return self._failed(exc, case)

    async def _awaited(self, pending: Awaitable[Any], case: Case) -> Score:
        try:
            return coerce_score(await pending)
        except Exception as exc:
            return self._failed(exc, case)

    def _failed(self, exc: Exception, case: Case) -> Score:
        """A scorer that raised: an errored score; an evalloop error that is not one case's stops the run."""
        if isinstance(exc, EvalloopError):
            if is_case_level(exc):
                return Score.error(f"scorer {self.name}: {exc.one_line()}")
            exc.where = f"{exc.where}, case '{case.id}'" if exc.where else f"case '{case.id}'"
            raise exc
        # the grader failed: errored, never a real score
        return Score.error(redact_text(scorer_failure(self.name, exc)))

