"""Evaluating a candidate prompt on some of a suite's cases: the suite's target and scorers through
evalloop's runner, into a throw-away history, lessons not injected; each case's score and feedback.

A candidate is written to a scratch file named by its hash, and the target's prompt parameter
(``--param``, default ``prompt_file``) points at it. One evaluation is one run of the runner
(:func:`evalloop.run.runner.execute`) over the wanted cases: concurrency, deadlines, whose failure,
the response cache, cost accounting and the cost budget are the runner's. Its history is a
SQLite file in the scratch folder, never the project's: evaluation runs are no baseline and
teach nothing. A case's **score** is the mean of the suite's scorers that graded it (an errored
or skipped grade is left out; none left: 0) — what the search maximises and the confirmation
compares. Its **feedback** is every scorer's message (a judge's rationale included) and the
target's error, if any. Results are kept per (candidate, case) in ``evaluations.jsonl`` of the
revision's state folder, so a resumed search pays for nothing twice.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from evalloop.config import Settings
from evalloop.history.store import HistoryStore
from evalloop.run.context import Services
from evalloop.run.options import RunOptions
from evalloop.run.runner import execute, prepare
from evalloop.scoring.registry import Registry
from evalloop.suites.models import Case, Suite, TargetRef

#: characters of one scorer message kept in a case's feedback
MESSAGE_CHARS = 2000


class CandidateCase(BaseModel):
    """One case graded under one candidate prompt."""

    id: str
    score: float = Field(description="the mean of the scorers that graded the case (0 when none did)")
    scores: dict[str, float | None] = Field(default_factory=dict, description="per scorer; None: not graded")
    output: str | None = None
    error: str | None = None
    feedback: str = ""
    cost_usd: float = 0.0


def text_hash(text: str) -> str:
    """A candidate prompt's name: the first 16 hex digits of its SHA-256."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class Evaluator:
    """Runs candidate prompts through the suite (async; one runner run per call)."""

    def __init__(self, suite: Suite, *, settings: Settings, registry: Registry, services: Services,
                 param: str, scratch: Path, memo: Path | None = None, suffix: str = ".txt",
                 redact: Callable[[str | None], str | None] | None = None) -> None:
        self.suite = suite.model_copy(update={"max_cost": None})  # the revision's budget governs
        self.settings, self.registry, self.services, self.param = settings, registry, services, param
        self.scratch, self.suffix, self.redact = scratch, suffix, redact or (lambda t: t)
        scratch.mkdir(parents=True, exist_ok=True)
        self.store = HistoryStore(f"sqlite:///{scratch / 'evaluations.db'}")
        self.memo_file = memo
        self.memo: dict[tuple[str, str], CandidateCase] = {}
        self.fresh = 0  # case evaluations run (not remembered)
        self.spent = 0.0  # what they cost (USD)
        if memo is not None and memo.is_file():
            for line in memo.read_text(encoding="utf-8").splitlines():
                try:
                    row = json.loads(line)
                    self.memo[(row.pop("candidate"), row["id"])] = CandidateCase.model_validate(row)
                except (ValueError, KeyError, TypeError):
                    continue  # a line cut short by an interrupted write: evaluated again

    def close(self) -> None:
        self.store.engine.dispose()

    def path_of(self, text: str) -> Path:
        """The scratch file holding ``text`` (written once)."""
        path = self.scratch / f"candidate-{text_hash(text)}{self.suffix}"
        if not path.is_file():
            path.write_text(text, encoding="utf-8")
        return path

    async def evaluate(self, text: str, ids: Sequence[str], *, remember: bool = True) -> list[CandidateCase]:
        """The results of prompt ``text`` on the cases ``ids``, in that order. ``remember=False``
        (the confirmation): run them afresh and keep them out of the remembered results."""
        key = text_hash(text)
        if not remember:
            return await self._run(text, list(ids))
        missing = [c for c in dict.fromkeys(ids) if (key, c) not in self.memo]
        if missing:
            for result in await self._run(text, missing):
                self.memo[(key, result.id)] = result
                if self.memo_file is not None:
                    with self.memo_file.open("a", encoding="utf-8") as f:
                        f.write(json.dumps({"candidate": key, **result.model_dump()}) + "\n")
        return [self.memo[(key, c)] for c in ids]

    async def _run(self, text: str, ids: list[str]) -> list[CandidateCase]:
        wanted = set(ids)
        params = {**self.suite.target.params, self.param: str(self.path_of(text))}
        suite = self.suite.model_copy(update={"target": TargetRef(ref=self.suite.target.ref, params=params)})
        settings = self.settings
        prepared = prepare(suite, self.registry, project_dir=settings.project_dir,
                           settings_thresholds=settings.thresholds, services=self.services,
                           verdict_defaults=settings.verdict.model_dump(exclude_none=True))
        executed = await execute(prepared, self.store, RunOptions(epochs=1, select=lambda c: c.id in wanted),
                                services=self.services, settings=settings, notes={"revision": True})
        run_id = executed.run.id
        scores: dict[str, dict[str, tuple[float | None, str]]] = {c: {} for c in ids}
        for row in self.store.score_rows(run_id):
            value = None if row.errored or row.skipped else row.value
            scores.setdefault(row.case_id, {})[row.scorer] = (value, _message(row.message, row.meta))
        results: dict[str, CandidateCase] = {}
        for case in self.store.case_results(run_id):
            graded = scores.get(case.case_id, {})
            values = [v for v, _ in graded.values() if v is not None]
            lines = [f"{name}: {'not graded' if v is None else f'{v:.2f}'}" + (f" — {m}" if m else "")
                     for name, (v, m) in graded.items()]
            if case.error:
                lines.insert(0, f"the target failed: {case.error}")
            results[case.case_id] = CandidateCase(
                id=case.case_id, score=sum(values) / len(values) if values else 0.0,
                scores={name: v for name, (v, _) in graded.items()}, output=self.redact(_output(case.output)),
                error=self.redact(case.error), feedback=self.redact("\n".join(lines)) or "", cost_usd=case.cost_usd)
        self.fresh += len(results)
        self.spent += sum(r.cost_usd for r in results.values())
        lost = [c for c in ids if c not in results]
        if lost:  # the runner started no case past the cost budget: the evaluation is incomplete
            from evalloop.llm.errors import BudgetExceeded

            raise BudgetExceeded(f"the revision's cost budget is spent: {len(lost)} case(s) not evaluated",
                                 where="--max-cost", hint="raise --max-cost and run again with --resume")
        return [results[c] for c in ids]


def _output(stored: str | None) -> str | None:
    """A stored output (JSON) as text: a string as itself, anything else as compact JSON."""
    if stored is None:
        return None
    try:
        value = json.loads(stored)
    except ValueError:
        return stored
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _message(message: str, meta: str | None) -> str:
    """A scorer's message, with a rationale its metadata carries apart."""
    text = message or ""
    if meta:
        try:
            extra = json.loads(meta)
        except ValueError:
            extra = {}
        if isinstance(extra, dict):
            for key in ("rationale", "reason", "reasoning"):
                if isinstance(extra.get(key), str) and extra[key] not in text:
                    text = f"{text} ({key}: {extra[key]})" if text else extra[key]
    return text[:MESSAGE_CHARS]


def case_text(value: Any) -> str:
    """A case's input or expected answer as text for a prompt."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def cases_by_id(suite: Suite) -> dict[str, Case]:
    return {c.id: c for c in suite.iter_cases()}
