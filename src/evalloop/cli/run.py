"""``evalloop run``: run suites, compare with the baseline, print the verdicts."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from evalloop.cli.app import (
    FailOpt,
    JsonOpt,
    NoFailOpt,
    ProjectOpt,
    app,
    err,
    fails_on_regression,
    friendly,
    out,
    settings_for,
)
from evalloop.errors import EvalloopError, FixtureError

if TYPE_CHECKING:
    from evalloop.config import Settings
    from evalloop.loop.pipeline import RunReport
    from evalloop.report.filters import CaseFilter
    from evalloop.run.options import RunOptions
    from evalloop.run.runner import PreparedRun
    from evalloop.scoring.registry import Registry
    from evalloop.suites.models import Suite

CaseOpt = Annotated[list[str] | None, typer.Option(
    "-k", "--case", metavar="PATTERN",
    help="Only cases whose id matches (a glob such as 'auth-*', else a substring). Repeat for several.",
    show_default=False)]
TagOpt = Annotated[list[str] | None, typer.Option(
    "--tag", metavar="TAG", help="Only cases with this tag (repeat: all of them).", show_default=False)]


@app.command()
@friendly
def run(
    suite: Annotated[list[str] | None, typer.Option("--suite", "-s", metavar="NAME",
                     help="Suite name (or path to a suite file). Repeat for several.")] = None,
    all_suites: Annotated[bool, typer.Option(
        "--all", help="Run the project's suites (those that ship with evalloop too, when the project "
                      "has none or with --shipped).")] = False,
    shipped: Annotated[bool, typer.Option(
        "--shipped", help="With --all: also run the suites that ship with evalloop.")] = False,
    epochs: Annotated[int | None, typer.Option(min=1, metavar="N", help="Run every case N times.")] = None,
    limit: Annotated[int | None, typer.Option(min=1, metavar="N", help="Only the first N cases.")] = None,
    case: CaseOpt = None,
    tag: TagOpt = None,
    concurrency: Annotated[int | None, typer.Option(min=1, metavar="N", help="Cases in flight at once.")] = None,
    held_out: Annotated[bool, typer.Option(
        "--held-out", help="Only the suite's held-out cases (never in a lesson): the verdict on them alone, "
                           "against the same cases of the baseline runs.")] = False,
    fail_on_regression: FailOpt = False,
    no_fail: NoFailOpt = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="List every failing case with its "
                                          "input, expected, output and messages.")] = False,
    json_out: JsonOpt = False,
    no_cases: Annotated[bool, typer.Option(
        "--no-cases", help="With --json/--json-out: leave out every case's input, expected, output "
                           "and scores (included by default).")] = False,
    _cases: Annotated[bool, typer.Option("--cases", hidden=True, help="The default.")] = False,
    json_file: Annotated[Path | None, typer.Option(
        "--json-out", metavar="PATH", help="Also write the JSON summary to this file.", show_default=False)] = None,
    junit: Annotated[Path | None, typer.Option(
        "--junit", metavar="PATH", help="Write JUnit XML (one testcase per case × scorer) to this file.",
        show_default=False)] = None,
    engine: Annotated[str | None, typer.Option(
        metavar="ENGINE",
        help="Engine of the reference memory operations: auto (llm when a key is set), local, llm.")] = None,
    model: Annotated[str | None, typer.Option(metavar="MODEL", help="LLM model (default claude-haiku-4-5).")] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Do not read or write the LLM response cache.")] = False,
    cache_only: Annotated[bool, typer.Option(
        "--cache-only", help="Replay LLM replies from the cache; a miss is an error naming the case.")] = False,
    max_cost: Annotated[float | None, typer.Option(
        "--max-cost", min=0.0, metavar="USD",
        help="Cost budget of each run: no LLM call starts once the estimate would pass it; the run "
             "is then marked invalid (never a baseline). Default: the suite's max_cost.",
        show_default=False)] = None,
    batch: Annotated[bool | None, typer.Option(
        "--batch/--live", help="Send the run's LLM calls (judges, and a target's through evalloop's client) "
                               "through the provider's batch API at half price; waits for the batches. "
                               "Default: the suite's batch setting.", show_default=False)] = None,
    resume: Annotated[str | None, typer.Option(
        "--resume", metavar="RUN", help="Run a killed batch run's suite again, collecting the requests it "
                                        "already submitted from its batches instead of submitting them again.",
        show_default=False)] = None,
    notify_sinks: Annotated[bool, typer.Option(
        "--notify", help="Send a run that fails to the configured sinks (setting `sinks`: the log, the "
                         "webhook), as a scheduled fire does.")] = False,
    nightly: Annotated[bool, typer.Option(
        "--nightly", help="Judge the run as one night of a series, within the suite's alarm budget "
                          "(scheduled fires do; a one-off run is judged alone).")] = False,
    no_bridge: Annotated[bool, typer.Option(
        "--no-bridge", help="When a scorer's measurement changed (a judge model, a rubric), restart its "
                            "baseline instead of re-grading the baseline runs' stored outputs (which costs "
                            "judge calls).")] = False,
    project: ProjectOpt = None,
) -> None:
    """Run suites against their targets, store the run, and compare it with the baseline.

    Exit 1 when a run fails (regression, broken scorer, invalid run), 2 on bad input.

    Example: [bold]evalloop run --suite exact-match[/bold]
    """
    import asyncio

    from evalloop.cli import lifecycle

    started = time.monotonic()
    if no_cache and cache_only:
        raise FixtureError("--no-cache and --cache-only exclude each other", hint="give one of them")
    failing = fails_on_regression(fail_on_regression, no_fail)
    with lifecycle.setting_up():  # what loads here lives until the end: no collections meanwhile
        import evalloop.loop.pipeline  # noqa: F401  (the run's modules)
        from evalloop.loop.exitcodes import exit_code_of, failure_lines
        from evalloop.report.terminal import closing_line, print_run
        from evalloop.run.signals import terminate_as_interrupt
        from evalloop.view.urls import failing_runs

        lifecycle.own_code_loaded()  # before the user's code, the suites and the history are touched
        if resume:
            resume, suite, repeat = _resumed(resume, suite, all_suites, project)
            epochs, limit = epochs or repeat.get("epochs"), limit or repeat.get("limit")
        unloaded: list[EvalloopError] = []
        # --limit without a case filter: a YAML suite is read only as far as its first N cases
        head = limit if not (case or tag or held_out) else None
        settings, registry, suites, which = _checked(suite, all_suites, shipped, case, tag, project, unloaded,
                                                     limit=head)
        from evalloop.history.engine import get_engine

        get_engine(settings.database_url)  # the history opens with the set-up: its driver, its schema check
    from evalloop.run.options import RunOptions

    options = RunOptions(epochs=epochs, limit=limit, concurrency=concurrency, engine=engine, model=model,
                         cache="off" if no_cache else "only" if cache_only else None, max_cost=max_cost,
                         batch=batch, resume=resume, nightly=nightly, bridge=not no_bridge)
    show_progress = not json_out and sys.stderr.isatty()
    reports: list[RunReport] = []
    said: set[str] = set()
    for loaded in suites:  # the checked suites are run as loaded: their cases are validated once
        with terminate_as_interrupt():  # SIGTERM (systemd, docker stop) ends the run like Ctrl-C
            chosen = options.model_copy(update={"select": _selector(which, loaded if held_out else None)})
            reports.append(asyncio.run(_run_one(loaded, settings, registry, chosen, show_progress)))
        for notice in reports[-1].notices:
            if notice not in said:
                said.add(notice)
                err().print(notice, markup=False)
        if notify_sinks:
            _notify(reports[-1], settings)
        if not json_out:
            print_run(reports[-1], out())
            if verbose:
                _print_failures(reports[-1], settings, which)
    if json_out or json_file:
        docs = [_summary(r, settings, which, not no_cases) for r in reports]
        text = json.dumps(docs[0] if len(docs) == 1 else docs, indent=2)
        if json_out:
            print(text)
        if json_file:
            json_file.parent.mkdir(parents=True, exist_ok=True)
            json_file.write_text(text + "\n", encoding="utf-8")
    if junit:
        from evalloop.history.store import HistoryStore
        from evalloop.report.junit import write_junit

        write_junit(junit, reports, HistoryStore(settings.database_url))
    code = exit_code_of(reports, fail_on_regression=failing)
    for line in failure_lines(reports) if code else []:
        err().print(line, markup=False)
    for line in failing_runs(reports, settings.viewer_url, fail_on_regression=failing) if code else []:
        err().print(line, markup=False, soft_wrap=True, highlight=False)
    for problem in unloaded:  # each suite that did not load, one line, and exit 2 at the end
        err().print(f"error: {problem.one_line()}", markup=False, soft_wrap=True, highlight=False)
    # the whole wait: start-up, loading and checking the suites, the runs and their reports
    err().print(closing_line(reports, lifecycle.waited(since=started)), markup=False, highlight=False)
    if unloaded:
        err().print(f"{len(unloaded)} suite{'s' if len(unloaded) > 1 else ''} did not load (above): exit 2",
                    markup=False, highlight=False)
        code = 2
    if code:
        raise typer.Exit(code)


def _checked(suite: list[str] | None, all_suites: bool, shipped: bool, case: list[str] | None,
             tag: list[str] | None, project: Path | None,
             unloaded: list[EvalloopError], limit: int | None = None,
             ) -> tuple[Settings, Registry, list[Suite], CaseFilter]:
    """The settings, scorers and suites of a run, and the case filter. Every suite is checked
    before any runs; one that does not load (a bad file, a scorer of a broken ``scorers/`` file)
    goes to ``unloaded`` and the others run (a nightly ``--all`` survives one bad file)."""
    from evalloop.report.filters import CaseFilter
    from evalloop.run.runner import prepare
    from evalloop.scoring.registry import discover
    from evalloop.suites.lookup import find_suite, suites_for_all

    which = CaseFilter(patterns=case or [], tags=tag or [])
    settings = settings_for(project)
    names = list(suite or [])
    if all_suites:
        names += [n for n in suites_for_all(settings.project_dir, shipped=shipped) if n not in names]
    if not names:
        raise FixtureError("no suite given", hint="use --suite NAME or --all (see `evalloop suites list`)")
    registry = discover(settings.project_dir, strict=False)
    for broken in registry.broken:  # told now; only the suites that need its scorers fail
        err().print(f"warning: {broken.one_line()}", markup=False, soft_wrap=True, highlight=False)
    suites: list[Suite] = []
    for name in names:
        try:
            loaded = find_suite(name, settings.project_dir, limit=limit)
            prepare(loaded, registry, project_dir=settings.project_dir, settings_thresholds=settings.thresholds,
                    verdict_defaults=settings.verdict.model_dump(exclude_none=True))
        except EvalloopError as exc:
            if len(names) == 1:  # the one suite asked for: its error is the answer
                raise
            unloaded.append(exc)
            continue
        suites.append(loaded)
    if not suites and unloaded:
        raise unloaded.pop()
    return settings, registry, suites, which


def _resumed(ref: str, suite: list[str] | None, all_suites: bool,
             project: Path | None) -> tuple[str, list[str], dict]:
    """The id and suite of the batch run ``ref`` (which must be resumable) and the options it repeats."""
    from evalloop.history.store import HistoryStore
    from evalloop.run.batchmode import resumable, resume_options

    if suite or all_suites:
        raise FixtureError("--resume runs the suite of the run it resumes", where="--resume",
                           hint="give --resume RUN without --suite or --all")
    run = resumable(HistoryStore(settings_for(project).database_url), ref)
    return run.id, [run.suite], resume_options(run)


def _notify(report: RunReport, settings) -> None:
    """A scheduled fire's regressions to the sinks; a bad sink setting falls back to the log."""
    import logging

    from evalloop.errors import EvalloopError
    from evalloop.scheduling.sinks import LogSink, build_sinks, notify

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        sinks = build_sinks(settings)
    except EvalloopError as exc:  # a bad sink setting must not lose the alarm
        logging.getLogger("evalloop.scheduler").error("sinks: %s (falling back to the log)", exc.one_line())
        sinks = [LogSink()]
    notify(report, sinks)


def _selector(which: CaseFilter, held_out_of: Suite | None = None):
    """The cases a run keeps (None: all): the case filter's, and with ``--held-out`` the suite's
    held-out part only."""
    if not which.active and held_out_of is None:
        return None
    held = held_out_of.held_out_ids() if held_out_of is not None else None
    return lambda c: (which.keeps_id(c.id) and which.keeps_tags(c.tags)
                      and (held is None or c.id in held))


def _summary(report: RunReport, settings, which: CaseFilter, with_cases: bool) -> dict:
    """The run's :class:`~evalloop.report.summary.RunSummary` as JSON (a scheduler reads it back
    with the same model)."""
    from evalloop.report.summary import run_summary

    summary = run_summary(report)
    if with_cases:
        from evalloop.history.store import HistoryStore
        from evalloop.report.cases import case_docs, load_cases

        summary.cases = case_docs(load_cases(HistoryStore(settings.database_url), report.executed.run.id,
                                             suite=report.suite))
    return summary.dump()


def _print_failures(report: RunReport, settings, which: CaseFilter) -> None:
    from evalloop.history.store import HistoryStore
    from evalloop.report.cases import load_cases, previous_completed, print_cases
    from evalloop.report.filters import CaseFilter

    store = HistoryStore(settings.database_url)
    run_id = report.executed.run.id
    views = load_cases(store, run_id, which=CaseFilter(failed=True), suite=report.suite,
                       previous_run=previous_completed(store, report.suite.name, run_id))
    if views:
        out().print(f"failing cases ({len(views)}):")
        print_cases(views, out(), tracebacks=True)


async def _run_one(suite: Suite, settings: Settings, registry: Registry, options: RunOptions,
                   show_progress: bool) -> RunReport:
    from evalloop.loop.pipeline import arun_suite

    if not show_progress:
        return await arun_suite(suite, options, settings=settings, registry=registry)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err(), transient=True) as bar:
        task = bar.add_task(suite.name, total=None)

        def started(prepared: PreparedRun) -> None:
            limit = options.limit
            total = min(prepared.n_cases, limit) if limit else prepared.n_cases
            bar.update(task, total=total * (options.epochs or prepared.suite.epochs))

        return await arun_suite(suite, options, settings=settings, registry=registry,
                                progress=lambda n: bar.advance(task, n), on_start=started)
