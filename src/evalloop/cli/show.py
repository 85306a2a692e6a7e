"""``evalloop show RUN``: every case of one stored run — input, expected, output, scores, messages."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer

from evalloop.cli.app import JsonOpt, ProjectOpt, app, err, friendly, out, settings_for
from evalloop.cli.run import CaseOpt, TagOpt

if TYPE_CHECKING:
    from evalloop.config import Settings


@app.command()
@friendly
def show(
    run_id: Annotated[str, typer.Argument(metavar="RUN", help="A run id or a unique prefix ('last' for the newest).")],
    failed: Annotated[bool, typer.Option("--failed", help="Only the cases that failed.")] = False,
    case: CaseOpt = None,
    tag: TagOpt = None,
    limit: Annotated[int | None, typer.Option(min=1, metavar="N", help="Show at most N cases.")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Also show the traceback of each case "
                                          "whose target raised.")] = False,
    json_out: JsonOpt = False,
    project: ProjectOpt = None,
) -> None:
    """Show each case of a run: input, expected, output (or error), every score and its message,
    and which cases newly fail or pass against the run before.

    Example: [bold]evalloop show last --failed[/bold]
    """
    from evalloop.cli.history import _suite_or_none, no_runs_yet
    from evalloop.history.runlog import synced_store
    from evalloop.report.cases import CaseFilter, case_docs, load_cases, previous_completed, print_cases
    from evalloop.report.diff import find_run
    from evalloop.report.layout import note
    from evalloop.report.terminal import print_history

    settings = settings_for(project)
    store = synced_store(settings.database_url, settings.history_dir, run_log=settings.run_log, create=False)
    if store is None:  # nothing to show, and nothing created
        raise no_runs_yet(settings)
    run = find_run(store, run_id, settings.database_url)
    which = CaseFilter(patterns=case or [], tags=tag or [], failed=failed)
    suite = _suite_or_none(run.suite, settings)
    previous = previous_completed(store, run.suite, run.id)
    views = load_cases(store, run.id, which=which, suite=suite, previous_run=previous)
    incidents = _incidents(settings, run.suite, run.id)
    if json_out:
        print(json.dumps({"run_id": run.id, "suite": run.suite, "previous_run": previous,
                          "cases": case_docs(views), "incidents": incidents}, indent=2))
        return
    console = out()
    summaries = store.summaries(run.id)
    print_history([run], {run.id: summaries}, console)
    from evalloop.history.eligibility import verdict_reason

    for name, summary in summaries.items():  # the verdict's own words, as `run` printed them
        if summary.verdict not in (None, "steady", "improved", "no baseline yet") and verdict_reason(summary):
            note(console, f"{name}: {summary.verdict} — {verdict_reason(summary)}")
    if run.bridge_of is not None:
        err().print(f"a bridge: run {run.bridge_of}'s outputs re-graded by a changed measurement (its scores "
                    f"here; its outputs: `evalloop show {run.bridge_of}`)", markup=False)
    elif run.origin == "log":
        err().print("this run came from the run log, which keeps scores but no outputs", markup=False)
    if suite is None:
        err().print(f"suite '{run.suite}' is not found now: inputs and expected values are not shown",
                    markup=False)
    print_cases(views, console, limit=limit, tracebacks=verbose)
    failing = sum(1 for v in views if not v.passed)
    newly_failing = sum(1 for v in views if v.change == "newly failing")
    newly_passing = sum(1 for v in views if v.change == "newly passing")
    against = f" against run {previous}" if previous else " (no earlier completed run to compare with)"
    note(console, f"{len(views)} case(s){' matching' if which.active else ''}: {failing} failing, "
         f"{newly_failing} newly failing, {newly_passing} newly passing{against}", indent=0)
    for item in incidents:
        note(console, f"incident {item['id']} — {item['line']}", indent=0)


def _incidents(settings: Settings, suite: str, run_id: str) -> list[dict[str, Any]]:
    """The suite's active incidents (open, held, promoted) and those this run moved: one line
    each, chronic cases apart."""
    if not settings.memory_url and not settings.memory_file.exists():
        return []
    from evalloop.learning import incidents as learning
    from evalloop.learning import injection

    try:
        adapter = injection.open_adapter(settings)
        try:
            found = learning.incidents(adapter, suite, status=None)
        finally:
            injection.close_adapter(adapter)
    except Exception as exc:  # noqa: BLE001 - the run's cases are shown without them
        err().print(f"failure memories not read: {exc}", markup=False)
        return []
    from evalloop.learning.incident_records import meta

    shown = []
    for record in found:
        m = meta(record)
        if m is not None and (m.status in learning.ACTIVE or run_id in m.eval_run_ids
                              or run_id in (m.resolved_run_id, m.accepted_run_id)):
            shown.append({"id": record.id, "scorer": m.scorer, "status": m.status, "failing_cases": m.failing_cases,
                          "chronic_cases": m.chronic_cases, "line": learning.describe(record)})
    return shown
