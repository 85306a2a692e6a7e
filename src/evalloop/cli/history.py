"""``evalloop history``: the stored runs of a project, newest first."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperGroup

from evalloop.cli.app import JsonOpt, ProjectOpt, app, err, friendly, out, settings_for
from evalloop.cli.run import CaseOpt, TagOpt
from evalloop.errors import EvalloopError

if TYPE_CHECKING:
    from evalloop.config import Settings


class SuiteOrCommand(TyperGroup):
    """``history SUITE`` beside ``history export|import``: a first word that names a subcommand
    is that subcommand; any other word is the suite."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        i = _first_word(self, args)
        if i is not None and args[i] in self.commands:
            super().parse_args(ctx, args[:i])
            ctx._protected_args, ctx.args = args[i:i + 1], args[i + 1:]
            return ctx.args
        ctx.allow_interspersed_args = True  # `history SUITE --json`: the options after it are ours
        return super().parse_args(ctx, args)


def _first_word(command: Any, args: list[str]) -> int | None:
    """The index of the first argument that is neither an option nor an option's value."""
    takes_value = {name for p in command.params if getattr(p, "param_type_name", "") == "option"
                   and not (getattr(p, "is_flag", False) or getattr(p, "count", False))
                   for name in (*p.opts, *p.secondary_opts)}
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            return i + 1 if i + 1 < len(args) else None
        if not arg.startswith("-") or arg == "-":
            return i
        i += 2 if arg in takes_value else 1
    return None


history_app = typer.Typer(help="Stored runs; `export`/`import` move them to and from the run log.",
                          cls=SuiteOrCommand)
app.add_typer(history_app, name="history")


@history_app.callback(invoke_without_command=True)
@friendly
def history(
    ctx: typer.Context,
    suite_name: Annotated[str | None, typer.Argument(
        metavar="SUITE", help="Only this suite (the same as --suite).", show_default=False)] = None,
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
    prints them.

    Example: [bold]evalloop history exact-match[/bold]
    """
    from evalloop.report.terminal import print_history

    if ctx.invoked_subcommand is not None:
        return
    if suite_name is not None and suite is not None and suite_name != suite:
        raise EvalloopError(f"two suites given: '{suite_name}' and --suite '{suite}'",
                            hint="give the suite either as an argument or with --suite")
    suite = suite or suite_name
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
    from evalloop.history.readonly import cannot_write
    from evalloop.history.runlog import export_runs
    from evalloop.history.store import HistoryStore

    settings = settings_for(project)
    url = settings.database_url  # export only reads the database: a read-only one will do
    counts = export_runs(HistoryStore(url, readonly=cannot_write(url)), settings.history_dir, suite or None)
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


@history_app.command("migrate")
@friendly
def history_migrate(project: ProjectOpt = None) -> None:
    """Bring the history database to this evalloop's revision (explicit: a shared server is never
    migrated implicitly). Run it once, from one host, after upgrading every host.

    Example: [bold]evalloop history migrate[/bold]
    """
    from evalloop.history.engine import store_where
    from evalloop.history.migrate import migrate

    settings = settings_for(project)
    before, now = migrate(settings.database_url)
    where = store_where(settings.database_url)
    if before == now:
        out().print(f"{where}: already at revision {now}")
    else:
        if before is None:
            was = "empty"
        elif before.startswith("pre-alembic:"):
            was = f"made before numbered migrations (its columns: revision {before.partition(':')[2]})"
        else:
            was = f"revision {before}"
        out().print(f"{where}: {was} → revision {now}")
