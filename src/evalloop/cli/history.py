"""``evalloop history``: the stored runs of a project, newest first."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

from evalloop.cli.app import JsonOpt, ProjectOpt, app, err, friendly, out, settings_for
from evalloop.cli.run import CaseOpt, TagOpt
from evalloop.errors import EvalloopError

if TYPE_CHECKING:
    from evalloop.config import Settings

history_app = typer.Typer(help="Stored runs; `export`/`import` move them to and from the run log.")
app.add_typer(history_app, name="history")


@history_app.callback(invoke_without_command=True)
@friendly
def history(
    ctx: typer.Context,
    suite: Annotated[str | None, typer.Option("--suite", "-s", metavar="NAME", help="Only this suite.")] = None,
    limit: Annotated[int, typer.Option(min=1, metavar="N", help="How many runs.")] = 20,
    run_id: Annotated[str | None, typer.Option("--run", metavar="RUN", help="Show one run (id or prefix).")] = None,
    case: CaseOpt = None,
    tag: TagOpt = None,
    json_out: JsonOpt = False,
    project: ProjectOpt = None,
) -> None:
    """Show stored runs with each scorer's mean, baseline, drop and verdict.

    With --run and --json, every case of the run (filtered by -k/--tag); `evalloop show RUN`
    prints them. Example: [bold]evalloop history --suite exact-match[/bold]
    """
    from evalloop.report.terminal import print_history

    if ctx.invoked_subcommand is not None:
        return
    from evalloop.history.runlog import synced_store
    from evalloop.redact import redact_url
    from evalloop.report.cases import CaseFilter, case_docs, load_cases
    from evalloop.report.diff import find_run

    settings = settings_for(project)
    store = synced_store(settings.database_url, settings.history_dir, run_log=settings.run_log,
                         suites=[suite] if suite else None, create=False)
    if store is None:  # no database and no run log: say so, and create nothing
        if run_id:
            raise no_runs_yet(settings)
        if json_out:
            print("[]")
        else:
            out().print(f"no runs yet{f' for {suite}' if suite else ''} in {redact_url(settings.database_url)}")
        return
    if not store.readonly:
        reaped = store.reap_dead_runs()
        if reaped:
            err().print(f"marked {len(reaped)} run(s) of dead processes failed: {', '.join(reaped)}")
    else:
        err().print("the history database is read-only here: showing what it holds, changing nothing",
                    markup=False)
    runs = [find_run(store, run_id, settings.database_url)] if run_id else store.runs(suite, limit=limit)
    total = len(runs) if run_id else store.count_runs(suite)
    summaries = {r.id: store.summaries(r.id) for r in runs}
    which = CaseFilter(patterns=case or [], tags=tag or [])
    if json_out:
        docs = []
        for r in runs:
            doc = {**r.model_dump(mode="json", exclude={"fingerprint", "notes"}),
                   "scorers": {k: v.model_dump(mode="json", exclude={"id", "run_id", "details"})
                               for k, v in summaries[r.id].items()}}
            if run_id or which.active:
                doc["cases"] = case_docs(load_cases(store, r.id, which=which, suite=_suite_or_none(r.suite, settings)))
            docs.append(doc)
        print(json.dumps(docs, indent=2))
        return
    if not runs:
        out().print(f"no runs yet{f' for {suite}' if suite else ''} in {redact_url(settings.database_url)}")
        return
    print_history(runs, summaries, out())
    if total > len(runs):
        out().print(f"showing {len(runs)} of {total} runs (newest first; --limit N for more)")
    if run_id:
        out().print(f"cases: `evalloop show {runs[0].id}` (--failed, -k PATTERN, --tag TAG)")


def _suite_or_none(name: str, settings):
    """The suite as its file holds it now, for cases' input and expected (None if gone)."""
    from evalloop.errors import EvalloopError
    from evalloop.suites.lookup import find_suite

    try:
        return find_suite(name, settings.project_dir)
    except EvalloopError:
        return None


SuitesOpt = Annotated[list[str] | None, typer.Option("--suite", "-s",
                      help="Only this suite (repeat for several; default: all).")]


@history_app.command("export")
@friendly
def history_export(suite: SuitesOpt = None, project: ProjectOpt = None) -> None:
    """Append the database's completed runs that history/<suite>.jsonl lacks.

    Example: [bold]evalloop history export --suite exact-match[/bold]
    """
    from evalloop.history.runlog import export_runs
    from evalloop.history.store import HistoryStore

    settings = settings_for(project)
    counts = export_runs(HistoryStore(settings.database_url), settings.history_dir, suite or None)
    for name, n in sorted(counts.items()):
        out().print(f"{name}: {n} run(s) appended to {settings.history_dir / (name + '.jsonl')}")
    if not counts:
        out().print("no runs to export")


@history_app.command("import")
@friendly
def history_import(suite: SuitesOpt = None, project: ProjectOpt = None) -> None:
    """Read runs from history/<suite>.jsonl into the database (those it lacks; idempotent).

    Example: [bold]evalloop history import[/bold]
    """
    from evalloop.history.runlog import import_logs
    from evalloop.history.store import HistoryStore

    settings = settings_for(project)
    counts = import_logs(HistoryStore(settings.database_url), settings.history_dir, suite or None)
    for name, n in sorted(counts.items()):
        out().print(f"{name}: {n} run(s) imported")
    if not counts:
        out().print(f"no run logs in {settings.history_dir}")


def no_runs_yet(settings: Settings) -> EvalloopError:
    """The one line for a reading command where there is no history yet (nothing is created)."""
    from evalloop.redact import redact_url

    return EvalloopError("no runs yet", where=redact_url(settings.database_url),
                         hint="run `evalloop run --suite NAME` first")
