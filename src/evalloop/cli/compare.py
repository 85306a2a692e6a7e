"""``evalloop compare RUN_A RUN_B``: per-scorer deltas between two runs and the cases that flipped."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from evalloop.cli.app import JsonOpt, ProjectOpt, app, friendly, out, settings_for

if TYPE_CHECKING:
    from evalloop.report.diff import ScorerDelta

MAX_SHOWN = 10


@app.command()
@friendly
def compare(
    run_a: Annotated[str, typer.Argument(
        metavar="RUN_A", help="The earlier run: an id, a unique prefix, or 'last' for the newest.")],
    run_b: Annotated[str | None, typer.Argument(
        metavar="RUN_B", help="The later run (default: RUN_A, compared with the completed run of its "
                              "suite before it).", show_default=False)] = None,
    json_out: JsonOpt = False,
    project: ProjectOpt = None,
) -> None:
    """Show per-scorer deltas from RUN_A to RUN_B and the cases that flipped.

    With one run, compare it with the completed run of its suite before it.

    Example: [bold]evalloop compare last[/bold]
    """
    from rich.table import Table

    from evalloop.history.runlog import synced_store
    from evalloop.report.diff import diff_runs, find_run
    from evalloop.report.format import num, some
    from evalloop.report.layout import Record, note, table_or_records

    settings = settings_for(project)
    store = synced_store(settings.database_url, settings.history_dir, run_log=settings.run_log, create=False)
    if store is None:  # nothing to compare, and nothing created
        from evalloop.cli.history import no_runs_yet

        raise no_runs_yet(settings)
    if run_b is None:
        from evalloop.errors import EvalloopError
        from evalloop.report.cases import previous_completed

        b = find_run(store, run_a, settings.database_url)
        before = previous_completed(store, b.suite, b.id)
        if before is None:
            raise EvalloopError(f"run {b.id} of suite '{b.suite}' has no completed run before it",
                                where=settings.database_url, hint="give two runs: evalloop compare RUN_A RUN_B")
        a = find_run(store, before, settings.database_url)
    else:
        a, b = find_run(store, run_a, settings.database_url), find_run(store, run_b, settings.database_url)
    diff = diff_runs(store, a, b)
    if json_out:
        print(diff.model_dump_json(indent=2))
        return
    console = out()
    suites = a.suite if a.suite == b.suite else f"{a.suite} → {b.suite}"
    note(console, f"{suites}  {a.id} → {b.id}", indent=0, hang=4, style="bold")
    table = Table(show_edge=False, pad_edge=False)
    for col in ("scorer", "A", "A 95% CI", "B", "B 95% CI", "delta", "relative", "p", "paired",
                "newly failing", "newly passing"):
        table.add_column(col, justify="left" if col == "scorer" else "right", no_wrap=True)
    records = []
    for d in diff.scorers:
        delta = "—" if d.delta is None else f"{d.delta:+.3f}"
        relative = "—" if d.relative is None else f"{d.relative:+.1%}"
        p = "—" if d.p_value is None else f"{d.p_value:.3g}{d.stars}"
        table.add_row(d.scorer, num(d.mean_a), _ci(d.ci_a), num(d.mean_b), _ci(d.ci_b), delta, relative, p,
                      str(d.common_cases), str(len(d.newly_failing)), str(len(d.newly_passing)))
        records.append(Record(d.scorer, [
            f"A {num(d.mean_a)} (95% CI {_ci(d.ci_a)}) → B {num(d.mean_b)} (95% CI {_ci(d.ci_b)})",
            f"delta {delta} ({relative}) · p {p} · {d.common_cases} paired cases",
            *(f"{label} ({len(cases)}): {some(cases, MAX_SHOWN)}" for label, cases in _flips(d) if cases)]))
    as_table = table_or_records(console, table, records)
    tests = sorted({d.test for d in diff.scorers if d.test})
    if tests:  # the two commands' p-values answer different questions: say which each is
        note(console, f"p: {' / '.join(tests)} between these two runs, on the cases both graded; "
                      "`run` and `show` test a run against its whole baseline window "
                      "(run-label permutation test), so their p differs", indent=0)
    if as_table:
        for d in diff.scorers:
            for label, cases in _flips(d):
                if cases:
                    note(console, f"{d.scorer} {label}: {some(cases, MAX_SHOWN)}")


def _flips(d: ScorerDelta) -> list[tuple[str, list[str]]]:
    return [("newly failing", d.newly_failing), ("newly passing", d.newly_passing)]


def _ci(ci: tuple[float, float] | None) -> str:
    return "—" if ci is None else f"{ci[0]:.2f}–{ci[1]:.2f}"
