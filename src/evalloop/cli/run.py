"""``evalloop run``: run suites, compare with the baseline, print the verdicts."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from evalloop.cli.app import JsonOpt, ProjectOpt, app, err, friendly, out, settings_for
from evalloop.errors import FixtureError

if TYPE_CHECKING:
    from evalloop.pipeline import RunReport


@app.command()
@friendly
def run(
    suite: Annotated[list[str] | None, typer.Option("--suite", "-s",
                     help="Suite name (or path to a suite file). Repeat for several.")] = None,
    all_suites: Annotated[bool, typer.Option("--all", help="Run every suite found.")] = False,
    epochs: Annotated[int | None, typer.Option(min=1, help="Run every case N times.")] = None,
    limit: Annotated[int | None, typer.Option(min=1, help="Only the first N cases.")] = None,
    concurrency: Annotated[int | None, typer.Option(min=1, help="Cases in flight at once.")] = None,
    fail_on_regression: Annotated[bool, typer.Option(
        "--fail-on-regression",
        help="Exit 1 when any scorer regressed, a scorer is broken, or a run is invalid.")] = False,
    json_out: JsonOpt = False,
    json_file: Annotated[Path | None, typer.Option(
        "--json-out", help="Also write the JSON summary to this file.", show_default=False)] = None,
    junit: Annotated[Path | None, typer.Option(
        "--junit", help="Write JUnit XML (one testcase per case × scorer) to this file.",
        show_default=False)] = None,
    engine: Annotated[str | None, typer.Option(
        help="Engine of the reference memory operations: auto (llm when a key is set), local, llm.")] = None,
    model: Annotated[str | None, typer.Option(help="LLM model (default claude-haiku-4-5).")] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Do not read or write the LLM response cache.")] = False,
    cache_only: Annotated[bool, typer.Option(
        "--cache-only", help="Replay LLM replies from the cache; a miss is an error naming the case.")] = False,
    project: ProjectOpt = None,
) -> None:
    """Run suites against their targets, store the run, and compare it with the baseline.

    Example: [bold]evalloop run --suite exact-match[/bold]
    """
    import asyncio

    from evalloop.report.summary import run_summary
    from evalloop.report.terminal import print_run
    from evalloop.runner import prepare
    from evalloop.scoring.registry import discover
    from evalloop.signals import terminate_as_interrupt
    from evalloop.suites import discover_suites, find_suite

    if no_cache and cache_only:
        raise FixtureError("--no-cache and --cache-only exclude each other", hint="give one of them")
    options = {"epochs": epochs, "limit": limit, "concurrency": concurrency, "engine": engine,
               "model": model, "cache": "off" if no_cache else "only" if cache_only else None}
    settings = settings_for(project)
    names = list(suite or [])
    if all_suites:
        names = sorted(discover_suites(settings.project_dir))
    if not names:
        raise FixtureError("no suite given", hint="use --suite NAME or --all (see `evalloop suites list`)")
    registry = discover(settings.project_dir)
    suites = [find_suite(name, settings.project_dir) for name in names]
    for loaded in suites:  # every suite is checked before any runs: a bad one stops nothing half-way
        prepare(loaded, registry, project_dir=settings.project_dir, settings_thresholds=settings.thresholds,
                verdict_defaults=settings.verdict.model_dump(exclude_none=True))
    show_progress = not json_out and sys.stderr.isatty()
    reports: list[RunReport] = []
    said: set[str] = set()
    for loaded in suites:  # the checked suites are run as loaded: their cases are validated once
        with terminate_as_interrupt():  # SIGTERM (systemd, docker stop) ends the run like Ctrl-C
            reports.append(asyncio.run(_run_one(loaded, settings, registry, options, show_progress)))
        for notice in reports[-1].notices:
            if notice not in said:
                said.add(notice)
                err().print(notice, markup=False)
        if not json_out:
            print_run(reports[-1], out())
    if json_out or json_file:
        docs = [run_summary(r) for r in reports]
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
    regressed = [r.suite.name for r in reports if r.comparison.has_regression]
    broken = [r.suite.name for r in reports if r.comparison.broken]
    invalid = [r.suite.name for r in reports if not r.outcome.run.valid]
    if fail_on_regression and (regressed or broken or invalid):
        for label, names in (("regression in", regressed), ("scorer broken in", broken),
                             ("invalid run (too many errored grades) in", invalid)):
            if names:
                err().print(f"{label} {', '.join(names)}", markup=False)
        raise typer.Exit(1)


async def _run_one(suite, settings, registry, options, show_progress) -> RunReport:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from evalloop.pipeline import arun_suite

    if not show_progress:
        return await arun_suite(suite, settings=settings, registry=registry, **options)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err(), transient=True) as bar:
        task = bar.add_task(suite.name, total=None)

        def started(prepared) -> None:
            limit = options["limit"]
            total = min(prepared.n_cases, limit) if limit else prepared.n_cases
            bar.update(task, total=total * (options["epochs"] or prepared.suite.epochs))

        return await arun_suite(suite, settings=settings, registry=registry, **options,
                                progress=lambda n: bar.advance(task, n), on_start=started)
