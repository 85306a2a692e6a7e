"""``evalloop accept``: declare a suite's latest run the new normal, with a reason."""

from __future__ import annotations

from typing import Annotated

import typer

from evalloop.cli.app import JsonOpt, ProjectOpt, app, friendly, out, settings_for


@app.command()
@friendly
def accept(
    suite: Annotated[str, typer.Argument(metavar="SUITE", help="The suite whose change is intended.")],
    reason: Annotated[str, typer.Option("--reason", metavar="TEXT", help="Why this is the new normal "
                                        "(kept in the history and the run log).")],
    scorer: Annotated[str | None, typer.Option("--scorer", metavar="NAME",
                                               help="Only this scorer (default: every scorer).")] = None,
    run_id: Annotated[str | None, typer.Option("--run", metavar="RUN",
                                               help="Accept this run (default: the latest full, valid one).")] = None,
    json_out: JsonOpt = False,
    project: ProjectOpt = None,
) -> None:
    """Accept an intended change: later baselines start from this run, and its open incidents close.

    A regression stays red until it is fixed or accepted. Example:
    [bold]evalloop accept similarity --reason "stricter prompt, fewer merges by design"[/bold]
    """
    import json

    from evalloop.history import runlog
    from evalloop.history.acceptance import accept as record
    from evalloop.history.store import HistoryStore

    settings = settings_for(project)
    store = HistoryStore(settings.database_url)
    if settings.run_log:
        runlog.sync_suite(store, settings.history_dir, suite)
    found = record(store, suite, reason, scorer=scorer, run_id=run_id)
    if settings.run_log:
        runlog.append_acceptance(settings.history_dir, found)
    closed = _close_incidents(settings, store, suite, scorer, reason, found.run_id)
    if json_out:
        print(json.dumps({**found.model_dump(), "closed_incidents": closed}, indent=2))
        return
    out().print(f"accepted run {found.run_id} of {suite} for {', '.join(found.scorers)}: {found.reason}",
                markup=False)
    out().print("later runs are compared with it" + (f"; closed {len(closed)} open incident(s)" if closed else ""),
                markup=False)


def _close_incidents(settings, store, suite: str, scorer: str | None, reason: str, run_id: str) -> list[str]:
    """Close the suite's open incidents as accepted, under the suite's learning lock (none when
    no memory store exists)."""
    from evalloop.learning import incidents, injection

    if not settings.memory_url and not settings.memory_file.exists():
        return []
    adapter = injection.open_adapter(settings)
    try:
        with incidents.step_lock(store.engine, suite):
            return incidents.accept_incidents(adapter, suite, scorer, reason, run_id)
    finally:
        injection.close_adapter(adapter)
