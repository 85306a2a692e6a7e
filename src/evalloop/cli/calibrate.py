"""``evalloop calibrate``: measure judge noise and suggest thresholds for a suite."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from evalloop.cli.app import JsonOpt, ProjectOpt, app, err, friendly, out, settings_for


@app.command()
@friendly
def calibrate(
    suite: Annotated[str, typer.Option("--suite", "-s", help="The suite to calibrate.")],
    repeats: Annotated[int, typer.Option(min=2, max=50, help="Grades of the same output per case.")] = 5,
    false_alarm_rate: Annotated[float, typer.Option(
        "--false-alarm-rate", min=0.001, max=0.5, help="Accepted false alarms per run.")] = 0.05,
    limit: Annotated[int | None, typer.Option(min=1, help="Only the first N cases.")] = None,
    engine: Annotated[str | None, typer.Option(help="auto, local or llm.")] = None,
    model: Annotated[str | None, typer.Option(help="LLM model.")] = None,
    json_out: JsonOpt = False,
    project: ProjectOpt = None,
) -> None:
    """Grade the same outputs several times per LLM scorer; store the per-case variance and
    suggest a threshold that keeps false alarms at the chosen rate for this suite's size.

    Example: [bold]evalloop calibrate --suite merge-quality --repeats 5[/bold]
    """
    import asyncio

    from rich.table import Table

    from evalloop.history.store import HistoryStore
    from evalloop.report.format import pct
    from evalloop.run.runner import prepare
    from evalloop.run.services import build_services, close_services
    from evalloop.scoring.registry import discover
    from evalloop.suites.lookup import find_suite
    from evalloop.verdicts.calibration import acalibrate, store_calibrations

    settings = settings_for(project)
    registry = discover(settings.project_dir)
    services, notices = build_services(settings, engine=engine, model=model)
    for notice in notices:
        err().print(notice, markup=False)
    suite_obj = find_suite(suite, settings.project_dir)
    prepared = prepare(suite_obj, registry, project_dir=settings.project_dir,
                       settings_thresholds=settings.thresholds, services=services)

    async def go():
        try:
            return await acalibrate(prepared, services, repeats=repeats, false_alarm_rate=false_alarm_rate,
                                    window=suite_obj.window or settings.window, limit=limit,
                                    concurrency=suite_obj.concurrency or settings.concurrency)
        finally:
            await close_services(services)

    results = asyncio.run(go())
    store_calibrations(HistoryStore(settings.database_url), suite_obj.name, results)
    if json_out:
        print(json.dumps([r.model_dump(mode="json") for r in results], indent=2))
        return
    table = Table(show_edge=False, pad_edge=False)
    for col in ("scorer", "kind", "cases", "mean", "noise sd", "threshold now", "suggested", "min. detectable drop",
                "note"):
        table.add_column(col)
    for r in results:
        c = r.calibration
        table.add_row(r.scorer, r.kind, str(c.n_cases) if c else "", f"{c.mean:.3f}" if c else "",
                      f"{c.noise_sd:.3f}" if c else "", pct(r.threshold),
                      pct(c.suggested_threshold) if c else "—", pct(r.minimal_detectable_drop), r.note)
    out().print(table)
