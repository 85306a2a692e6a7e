"""``evalloop schedule add|list|remove|pause|resume`` and ``evalloop scheduler start``."""

from __future__ import annotations

import json
import logging
from datetime import datetime
from typing import Annotated

import typer

from evalloop.cli.app import JsonOpt, ProjectOpt, app, friendly, out, settings_for
from evalloop.redact import redact_url

schedule_app = typer.Typer(help="Scheduled regression checks, stored beside the history.",
                           no_args_is_help=True)
scheduler_app = typer.Typer(help="Run the scheduler that executes scheduled checks.",
                            no_args_is_help=True)
app.add_typer(schedule_app, name="schedule")
app.add_typer(scheduler_app, name="scheduler")

IdArg = Annotated[str, typer.Argument(help="Schedule id (or unique prefix).")]


@schedule_app.command("add")
@friendly
def schedule_add(
    suite: Annotated[list[str], typer.Option("--suite", "-s", help="Suite to run (repeat for several).")],
    cron: Annotated[str | None, typer.Option(help='Crontab expression, e.g. "0 3 * * *".')] = None,
    every: Annotated[str | None, typer.Option(help="Interval: 45s, 30m, 6h, 1d, 1h30m.")] = None,
    tz: Annotated[str | None, typer.Option("--tz", help="IANA time zone (default: local).")] = None,
    job_id: Annotated[str | None, typer.Option("--id", help="Schedule id (default: random).")] = None,
    grace: Annotated[int | None, typer.Option(
        min=1, help="Seconds a missed fire may still run late (default: misfire_grace_seconds).")] = None,
    now: Annotated[bool, typer.Option("--now", help="Also fire as soon as a scheduler runs.")] = False,
    batch: Annotated[bool, typer.Option(
        "--batch", help="Run through the provider's batch API (half price; see `evalloop run --batch`).")] = False,
    max_cost: Annotated[float | None, typer.Option(
        "--max-cost", min=0.0, metavar="USD", help="Cost budget of each run (see `evalloop run --max-cost`).",
        show_default=False)] = None,
    json_out: JsonOpt = False,
    project: ProjectOpt = None,
) -> None:
    """Add a schedule: run suites on a cron expression or an interval.

    Example: [bold]evalloop schedule add --suite similarity --cron "0 3 * * *" --tz Europe/Berlin[/bold]
    """
    from evalloop.scheduling.scheduler import add_schedule
    from evalloop.scheduling.triggers import resolve_timezone

    settings = settings_for(project)
    first = datetime.now(resolve_timezone(tz or settings.timezone)) if now else None
    info = add_schedule(settings, list(suite), cron=cron, every=every, tz=tz, job_id=job_id,
                        grace_seconds=grace, first_run=first, batch=batch, max_cost=max_cost)
    if json_out:
        print(info.model_dump_json(indent=2))
        return
    out().print(f"added {info.id}: {', '.join(info.suites)} {info.trigger}; next run {_when(info.next_run)}")


@schedule_app.command("list")
@friendly
def schedule_list(json_out: JsonOpt = False, project: ProjectOpt = None) -> None:
    """List schedules: id, suites, trigger, next run, last run and its verdict."""
    from rich.table import Table

    from evalloop.report.layout import Record, table_or_records
    from evalloop.scheduling.scheduler import list_schedules

    settings = settings_for(project)
    schedules = list_schedules(settings)
    if json_out:
        print(json.dumps([s.model_dump(mode="json") for s in schedules], indent=2))
        return
    if not schedules:
        out().print(f"no schedules in {redact_url(settings.database_url)}")
        return
    table = Table(show_edge=False, pad_edge=False)
    for col in ("id", "suites", "trigger", "next run", "last run", "verdict"):
        table.add_column(col, no_wrap=col != "suites")
    records = []
    for s in schedules:
        next_run = "paused" if s.paused else _when(s.next_run)
        table.add_row(s.id, ", ".join(s.suites), s.trigger, next_run, _when(s.last_run), s.last_verdict or "—")
        records.append(Record(f"{s.id}  {s.trigger}", [f"suites: {', '.join(s.suites)}",
                                                       f"next run {next_run} · last run {_when(s.last_run)}"
                                                       + (f" ({s.last_verdict})" if s.last_verdict else "")]))
    table_or_records(out(), table, records)


@schedule_app.command("remove")
@friendly
def schedule_remove(job_id: IdArg, project: ProjectOpt = None) -> None:
    """Remove a schedule."""
    from evalloop.scheduling.scheduler import remove_schedule

    out().print(f"removed {remove_schedule(settings_for(project), job_id)}")


@schedule_app.command("pause")
@friendly
def schedule_pause(job_id: IdArg, project: ProjectOpt = None) -> None:
    """Pause a schedule (it keeps its place; `resume` picks it up again)."""
    from evalloop.scheduling.scheduler import pause_schedule

    out().print(f"paused {pause_schedule(settings_for(project), job_id)}")


@schedule_app.command("resume")
@friendly
def schedule_resume(job_id: IdArg, project: ProjectOpt = None) -> None:
    """Resume a paused schedule from its next fire time after now."""
    from evalloop.scheduling.scheduler import resume_schedule

    out().print(f"resumed {resume_schedule(settings_for(project), job_id)}")


@scheduler_app.command("start")
@friendly
def scheduler_start(
    poll: Annotated[float | None, typer.Option(
        min=0.01, help="Seconds between checks for schedules added elsewhere.")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log APScheduler's own steps.")] = False,
    stop_timeout: Annotated[float | None, typer.Option(
        min=0, help="After a stop signal, wait at most this many seconds for the run in progress, "
                    "then interrupt it (default: scheduler_stop_seconds, else wait).")] = None,
    project: ProjectOpt = None,
) -> None:
    """Run scheduled checks in the foreground until SIGINT/SIGTERM.

    The first signal finishes the run in progress (at most --stop-timeout seconds) and exits 0;
    a second one, or the timeout, interrupts it: finished cases are kept, the run is marked
    interrupted, and the exit code is 143 after SIGTERM (130 after SIGINT).
    """
    from evalloop.scheduling.scheduler import serve

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("apscheduler").setLevel(logging.INFO if verbose else logging.WARNING)
    code = serve(settings_for(project), poll_seconds=poll, stop_timeout=stop_timeout)
    raise typer.Exit(code)


def _when(at: datetime | None) -> str:
    return "—" if at is None else at.isoformat(sep=" ", timespec="seconds")
