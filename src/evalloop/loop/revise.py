"""``evalloop prompt revise``: evolve a prompt with GEPA on the learn cases, confirm it once on the
held-out cases, and write it only when that confirmation says it is better.

1. **Plan** (nothing spent): the three splits (:mod:`evalloop.loop.revise_plan`: train and
   validation are the suite's learn cases, test its held-out cases), the search's budget, and the
   test split's power at the level this use of it has — printed, with a warning when the gain it
   can detect is larger than the gain worth having.
2. **Search**: ``gepa.optimize`` (:mod:`evalloop.loop.gepa_adapter`) reflects on minibatches of the
   train split — the failures of the candidate it improves, with every scorer's feedback, and the
   lesson of the suite's open incident when there is one — and keeps a Pareto frontier of
   candidates on the validation split, within ``--max-metric-calls`` (and ``--max-cost``). Its
   state is kept in ``history/revise/<suite>/<key>/``; ``--resume`` continues it.
3. **Confirm**: the candidate GEPA ranks best on the validation split against the current prompt,
   once, paired on the test split (:mod:`evalloop.loop.confirmation`). The test split is never shown
   to the search.
4. **Record and write**: the record (:mod:`evalloop.learning.revisions`) goes to the suite's
   ledger, to the incidents that seeded the reflection, and beside the written file. A better
   candidate is written to ``PROMPT.revised``, or over the prompt with ``write`` (and the
   lessons it folds in are then promoted: no longer injected).
"""

from __future__ import annotations

import asyncio
import difflib
import hashlib
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from evalloop.config import RevisionSettings, Settings
from evalloop.errors import ConfigError, EvalloopError
from evalloop.learning import injection
from evalloop.learning.revisions import Confirmation, Ledger, RevisionRecord, store_with_incidents, write_sidecar
from evalloop.llm.errors import BudgetExceeded
from evalloop.loop import revise_search
from evalloop.loop.confirmation import confirm
from evalloop.loop.revise_eval import Evaluator, cases_by_id, text_hash
from evalloop.loop.revise_plan import (
    Power,
    Splits,
    alpha_for,
    current_estimate,
    default_budget,
    plan_power,
    revision_splits,
)
from evalloop.loop.revise_search import Search
from evalloop.memory.records import MemoryRecord
from evalloop.run.context import Services
from evalloop.scoring.registry import Registry, discover
from evalloop.suites.lookup import find_suite
from evalloop.suites.models import Suite


class Revision(BaseModel):
    """What ``evalloop prompt revise`` prints (``--json``: this, as JSON)."""

    prompt_file: str
    suite: str
    param: str
    start: str = Field(description="what seeded reflection: 'incident' (its lesson) or 'failing cases'")
    incidents: list[str] = Field(default_factory=list)
    splits: Splits
    power: Power
    max_metric_calls: int
    max_cost: float | None = None
    search: Search | None = None
    confirmation: Confirmation | None = None
    cost_usd: float = 0.0
    outcome: str = ""
    written: str | None = None
    sidecar: str | None = None
    ledger: str | None = None
    stored_with: list[str] = Field(default_factory=list)
    promoted: list[str] = Field(default_factory=list)
    diff: str = ""
    notices: list[str] = Field(default_factory=list)


async def arevise(prompt_file: Path, suite: str, *, settings: Settings, write: bool = False,
                  param: str = "prompt_file", registry: Registry | None = None, engine: str | None = None,
                  model: str | None = None, reflection_model: str | None = None,
                  options: RevisionSettings | None = None, incident: str | None = None, resume: bool = False,
                  dry_run: bool = False, say: Callable[[str], None] | None = None,
                  services: Services | None = None) -> Revision:
    """Plan, search, confirm, record and (when better) write; see the module's text. ``options``
    replace the project's ``[revise]`` settings; ``say`` is told the plan and the search's progress;
    ``services`` (the LLM clients, kept open) replace those built from the settings."""
    opts = options or settings.revise
    tell = say or (lambda _line: None)
    base = find_suite(suite, settings.project_dir)
    prompt = _read(prompt_file)
    if param in base.target.params and Path(str(base.target.params[param])).name != prompt_file.name:
        raise ConfigError(f"the suite's target already sets {param}={base.target.params[param]!r}, not this file",
                          where=str(base.path or base.name), hint="revise that file, or name another --param")
    _check_target(base, settings, param, prompt_file)
    splits = revision_splits(base, opts.validation)
    lesson, incident_ids = _lessons(settings, base, incident)
    ledger = Ledger(settings.history_dir, base.name)
    use = ledger.uses(splits.test) + 1
    alpha = alpha_for(use, opts.alpha)
    current, binary, spread, source = _current(settings, base, splits.test)
    power = plan_power(len(splits.test), use, alpha, current, binary, source=source, power=opts.power,
                       min_gain=opts.min_gain, spread=spread)
    budget = opts.max_metric_calls or default_budget(len(splits.validation))
    run_dir = _state_dir(settings, base, prompt_file, prompt, splits, opts, resume)
    revision = Revision(prompt_file=str(prompt_file), suite=base.name, param=param,
                        start="incident" if incident_ids else "failing cases", incidents=incident_ids,
                        splits=splits, power=power, max_metric_calls=budget, max_cost=opts.max_cost)
    if dry_run:
        _tell_plan(tell, revision)
        revision.outcome = "plan only (--dry-run): nothing spent"
        return revision
    from evalloop.learning.heldout import Redactor
    from evalloop.llm.budget import budget_scope
    from evalloop.llm.usage import usage_scope
    from evalloop.run.services import build_services, close_services

    owned = services is None
    if services is None:
        services, notices = build_services(settings, engine=engine, model=model)
        revision.notices += notices
    if services.llm is None:
        if owned:
            await close_services(services)
        raise ConfigError("prompt revise needs an LLM to reflect with, and none is configured",
                          where="environment", hint="set ANTHROPIC_API_KEY (or EVALLOOP_LLM_BASE_URL)")
    _tell_plan(tell, revision)
    _fresh_state(run_dir, resume)
    cases = cases_by_id(base)
    best = prompt
    with tempfile.TemporaryDirectory(prefix="evalloop-revise-") as tmp, budget_scope(opts.max_cost), \
            usage_scope() as spent:
        evaluator = Evaluator(base, settings=settings, registry=registry or discover(settings.project_dir),
                              services=services, param=param, scratch=Path(tmp), memo=run_dir / "evaluations.jsonl",
                              suffix=prompt_file.suffix or ".txt", redact=Redactor.of(cases.values(), set(splits.test)))
        try:
            revision.search, best = await revise_search.search(
                evaluator, splits, prompt, cases=cases, lesson=lesson, client=services.llm, model=reflection_model,
                opts=opts, budget=budget, run_dir=run_dir, resume=resume, spent=lambda: spent.cost_usd, say=tell)
            if best != prompt and revision.search.stopped != revise_search.SPENT:
                tell(f"confirming on the test split ({len(splits.test)} cases, current prompt and candidate)")
                before = await evaluator.evaluate(prompt, splits.test, remember=False)
                after = await evaluator.evaluate(best, splits.test, remember=False)
                revision.confirmation = confirm(before, after, alpha=alpha, groups=splits.test_groups)
        except BudgetExceeded as exc:  # in the confirmation (the search reads its own): nothing is confirmed
            revision.notices.append(f"the confirmation was cut short: {exc.what}")
        finally:
            evaluator.close()
            if owned:
                await close_services(services)
        revision.cost_usd = spent.cost_usd
    return _finish(revision, settings, prompt_file, prompt, best, write, ledger, use, alpha)


def _finish(revision: Revision, settings: Settings, prompt_file: Path, prompt: str, best: str, write: bool,
            ledger: Ledger, use: int, alpha: float) -> Revision:
    """The outcome, the record in its three places, and the written file."""
    search, confirmation, splits = revision.search, revision.confirmation, revision.splits
    if best != prompt:
        revision.diff = "".join(difflib.unified_diff(prompt.splitlines(keepends=True), best.splitlines(keepends=True),
                                                     fromfile=str(prompt_file), tofile=f"{prompt_file} (revised)"))
    if confirmation is not None and confirmation.better:
        target = prompt_file if write else prompt_file.with_name(prompt_file.name + ".revised")
        revision.written = str(target)
        revision.outcome = f"better on the test split: written to {target}"
    elif confirmation is not None:
        revision.outcome = "not shown better on the test split: nothing written"
    elif search is not None and best != prompt:
        revision.outcome = ("the cost budget was spent before the confirmation: nothing written (raise --max-cost "
                            "and run again with --resume)")
    elif search is not None:
        revision.outcome = "no candidate beat the current prompt on the validation split: the test split was not used"
    else:
        revision.outcome = "the search did not run: nothing written"
    record = RevisionRecord(
        suite=revision.suite, prompt_file=revision.prompt_file, param=revision.param, start=revision.start,
        incidents=revision.incidents, before_sha=text_hash(prompt),
        after_sha=text_hash(best) if best != prompt else None,
        diff=revision.diff, splits={"train": len(splits.train), "validation": len(splits.validation),
                                    "test": len(splits.test)},
        validation_share=splits.validation_share, holdout=splits.holdout, salt=splits.salt,
        test_digest=splits.test_digest(), test_ids=splits.test if confirmation is not None else [], use=use,
        alpha=alpha, confirmation=confirmation, metric_calls=search.metric_calls if search else 0,
        max_metric_calls=revision.max_metric_calls, iterations=search.iterations if search else 0,
        candidates=search.candidates if search else 0, cost_usd=revision.cost_usd, outcome=revision.outcome,
        written=revision.written)
    if revision.written:
        target = Path(revision.written)
        target.write_text(best, encoding="utf-8")
        revision.sidecar = str(write_sidecar(target, record))
    ledger.append(record)
    revision.ledger = str(ledger.path)
    if revision.incidents:
        revision.stored_with, note = _store(settings, revision.suite, revision.incidents, record)
        revision.notices += [note] if note else []
    if write and revision.written and revision.incidents:
        revision.promoted, note = _promote(settings, revision.suite, revision.written)
        revision.notices += [note] if note else []
    return revision


def _tell_plan(tell: Callable[[str], None], revision: Revision) -> None:
    """The plan, before anything is spent: the splits, the test split's power, the budget."""
    splits, power = revision.splits, revision.power
    tell(f"{revision.suite}: {splits.sizes()} — the test split is the suite's held-out cases ({splits.holdout}), "
         "never shown to the search")
    tell(power.line())
    if power.warning:
        tell(f"warning: {power.warning}")
    seed = f"the lesson of {', '.join(revision.incidents)}" if revision.incidents else "the failing cases"
    tell(f"search budget: {revision.max_metric_calls} metric calls"
         + (f", ${revision.max_cost:g} in all" if revision.max_cost else "") + f"; reflection starts from {seed}")


def _check_target(suite: Suite, settings: Settings, param: str, prompt_file: Path) -> None:
    """The suite's target takes the prompt parameter (one clear line before anything is said or
    spent, not a failure of every case)."""
    from evalloop.run.targets import resolve_target

    resolve_target(suite.target.ref, {**suite.target.params, param: str(prompt_file.resolve())},
                   project_dir=settings.project_dir)


def _read(prompt_file: Path) -> str:
    try:
        return prompt_file.read_text(encoding="utf-8")
    except OSError as exc:
        raise EvalloopError(f"cannot read prompt file: {exc.strerror}", where=str(prompt_file)) from None


def _lessons(settings: Settings, suite: Suite, incident: str | None) -> tuple[str | None, list[str]]:
    """The lesson text of the suite's open incidents that may enter a prompt (or of ``incident``
    alone), fenced, and their ids; none: the revision starts from the failing cases."""
    if not injection.has_memories(settings):
        found: list[MemoryRecord] = []
    else:
        adapter = injection.open_adapter(settings)
        try:
            found = injection.lesson_records(adapter, suite, limit=settings.inject_limit if incident is None
                                             else injection.MAX_LESSONS)[0]
        finally:
            injection.close_adapter(adapter)
    if incident is not None:
        found = [r for r in found if r.id == incident]
        if not found:
            raise ConfigError(f"suite '{suite.name}' has no open incident {incident} that may seed a revision",
                              where="--incident", hint="see `evalloop memories list --tag status:open`")
    if not found:
        return None, []
    text = injection.render(found, budget=settings.inject_budget, per_memory=settings.inject_per_memory,
                            detail="full")
    return text or None, [r.id for r in found]


def _current(settings: Settings, suite: Suite, test: list[str]) -> tuple[float, bool, float, str]:
    """The current prompt's mean score on the test split as the history last saw it (its last
    completed run), for the power said before spending; none: a coin (0.5, the widest spread)."""
    from evalloop.history.runlog import synced_store

    per_case: list[float] = []
    where = "no run in the history: assumed"
    store = synced_store(settings.database_url, settings.history_dir, run_log=settings.run_log,
                         suites=[suite.name], create=False)
    if store is not None:
        try:
            runs = store.runs(suite.name, limit=1, statuses=["completed"])
            if runs:
                wanted = set(test)
                by_case: dict[str, list[float]] = {}
                for label in suite.scorer_labels:
                    for case_id, value in store.case_scores(runs[0].id, label).items():
                        if case_id in wanted:
                            by_case.setdefault(case_id, []).append(value)
                per_case = [sum(v) / len(v) for v in by_case.values()]
                where = f"run {runs[0].id}"
        finally:
            store.engine.dispose()
    mean, binary, spread, seen = current_estimate(per_case)
    return mean, binary, spread, where if seen else "no run in the history: assumed"


def _state_dir(settings: Settings, suite: Suite, prompt_file: Path, prompt: str, splits: Splits,
               opts: RevisionSettings, resume: bool) -> Path:
    """The search's state folder, named by what it searched from (the suite, the prompt file and
    its text, the splits and the search's settings): ``--resume`` continues only that search, and
    without a saved one it is one clear error before anything is said or spent."""
    key = hashlib.sha256("\0".join([
        str(prompt_file.resolve()), text_hash(prompt), ",".join(splits.train), ",".join(splits.validation),
        str(opts.minibatch), str(opts.seed), str(opts.merge)]).encode()).hexdigest()[:12]
    root = settings.history_dir / "revise"
    path = root / suite.name.replace("/", "_") / f"{prompt_file.stem}-{key}"
    if resume and not (path / "gepa_state.bin").is_file():
        raise ConfigError(f"no saved search to resume for {prompt_file} on suite '{suite.name}'", where=str(path),
                          hint="run without --resume to start one (the prompt, the splits and the search settings "
                               "must be those of the search to resume)")
    return path


def _fresh_state(path: Path, resume: bool) -> None:
    """The state folder ready for the search: kept to resume it, else emptied; never committed."""
    if not resume and path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True, exist_ok=True)
    (path / "gepa.stop").unlink(missing_ok=True)  # an interrupted search left it: resuming goes on
    ignore = path.parent.parent / ".gitignore"
    if not ignore.exists():
        ignore.write_text("# prompt revise's search state: local, never committed\n*\n", encoding="utf-8")


def _store(settings: Settings, suite: str, ids: list[str], record: RevisionRecord) -> tuple[list[str], str | None]:
    """The record with the incidents that seeded the reflection; a failing store is a notice."""
    from evalloop.history.store import HistoryStore
    from evalloop.learning.incidents import step_lock

    try:
        store = HistoryStore(settings.database_url)
        try:
            with step_lock(store.engine, suite):
                adapter = injection.open_adapter(settings)
                try:
                    return store_with_incidents(adapter, suite, ids, record), None
                finally:
                    injection.close_adapter(adapter)
        finally:
            store.engine.dispose()
    except Exception as exc:  # noqa: BLE001 - the revision itself is done and recorded in the ledger
        text = exc.one_line() if isinstance(exc, EvalloopError) else str(exc)
        return [], f"the revision record was not stored with the incidents: {text}"


def _promote(settings: Settings, suite: str, written: str) -> tuple[list[str], str | None]:
    """The lessons folded into the written prompt stop being injected: the suite's open incidents
    become ``promoted`` (:func:`evalloop.learning.promotion.promote_lessons`)."""
    from evalloop.learning.promotion import promote_lessons

    try:
        found = promote_lessons(settings, suite, reason=f"folded into {written} by prompt revise --write")
    except Exception as exc:  # noqa: BLE001 - the prompt is written; the lessons can be promoted by hand
        text = exc.one_line() if isinstance(exc, EvalloopError) else str(exc)
        return [], f"the lessons were not promoted: {text}"
    return [r.id for r in found], None


def revise(prompt_file: Path, suite: str, **kwargs: Any) -> Revision:
    """:func:`arevise`, from synchronous code."""
    return asyncio.run(arevise(prompt_file, suite, **kwargs))
