"""``evalloop failures SUITE``: each case's failure history across runs, grouped by pattern."""

from __future__ import annotations

from typing import Annotated

import typer

from evalloop.cli.app import JsonOpt, ProjectOpt, app, err, friendly, out, settings_for


@app.command()
@friendly
def failures(
    suite: Annotated[str, typer.Argument(metavar="SUITE", help="The suite whose failures to show.")],
    runs: Annotated[int, typer.Option("--runs", min=1, max=1000, metavar="N",
                                      help="How many of its last completed runs to read.")] = 20,
    failing: Annotated[bool, typer.Option("--failing", help="Only the cases failing in their newest run.")] = False,
    limit: Annotated[int, typer.Option("--limit", min=1, metavar="N", help="Cases shown per pattern.")] = 10,
    json_out: JsonOpt = False,
    project: ProjectOpt = None,
) -> None:
    """Each case's failures across the suite's last runs, grouped by pattern.

    For every case that failed: how often, since when, which incidents remember it, learn or held
    out; grouped by what went wrong (expected X, got Y, or the scorer's message).

    Example: [bold]evalloop failures similarity --runs 30[/bold]
    """
    from evalloop.cli.history import _suite_or_none, no_runs_yet
    from evalloop.history.runlog import synced_store
    from evalloop.report.failures import failure_history, lines
    from evalloop.report.layout import Record, note, print_records

    settings = settings_for(project)
    store = synced_store(settings.database_url, settings.history_dir, run_log=settings.run_log, create=False)
    if store is None:  # nothing to show, and nothing created
        raise no_runs_yet(settings)
    found = failure_history(store, suite, runs=runs, fixture=_suite_or_none(suite, settings),
                            incidents=_incidents(settings, suite), failing_only=failing)
    if json_out:
        print(found.model_dump_json(indent=2))
        return
    console = out()
    if not found.runs:
        err().print(f"suite '{suite}' has no completed run yet", markup=False)
        return
    span = f"{(found.first_run or '')[:16]} … {(found.last_run or '')[:16]}".replace("T", " ") + " UTC"
    if not found.cases:
        note(console, f"{suite}: no case {'fails now' if failing else 'failed'} in its last {found.runs} run(s) "
                      f"({span})", indent=0)
        return
    note(console, f"{suite}: {found.cases} case(s) {'failing now' if failing else 'failed'} in its last "
                  f"{found.runs} run(s) ({span}), in {len(found.patterns)} pattern(s)", indent=0)
    for heading, rows in lines(found, limit):
        console.print()
        print_records(console, [Record(heading, rows)])


def _incidents(settings, suite: str) -> list:
    """The suite's incidents in any state ([] without a memory store; a broken one is told)."""
    if not settings.memory_url and not settings.memory_file.exists():
        return []
    from evalloop.learning import incidents as learning
    from evalloop.learning import injection

    try:
        adapter = injection.open_adapter(settings)
        try:
            return learning.incidents(adapter, suite, status=None)
        finally:
            injection.close_adapter(adapter)
    except Exception as exc:  # noqa: BLE001 - the history is shown without them
        err().print(f"failure memories not read: {exc}", markup=False)
        return []
