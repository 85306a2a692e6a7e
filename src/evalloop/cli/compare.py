"""``evalloop compare RUN_A RUN_B``: per-scorer deltas between two runs and the cases that flipped."""

from __future__ import annotations

from typing import Annotated

import typer

from evalloop.cli.app import JsonOpt, ProjectOpt, app, friendly, out, settings_for

MAX_SHOWN = 10


@app.command()
@friendly
def compare(
    run_a: Annotated[str, typer.Argument(help="The earlier run (id or unique prefix).")],
    run_b: Annotated[str, typer.Argument(help="The later run (id or unique prefix).")],
    json_out: JsonOpt = False,
    project: ProjectOpt = None,
) -> None:
    """Show per-scorer deltas from RUN_A to RUN_B and the cases that flipped.

    Example: [bold]evalloop compare 20250101T030000 20250102T030000[/bold]
    """
    from rich.table import Table

    from evalloop.history.runlog import synced_store
    from evalloop.report.diff import diff_runs, find_run
    from evalloop.report.format import num

    settings = settings_for(project)
    store = synced_store(settings.database_url, settings.history_dir, run_log=settings.run_log, create=False)
    if store is None:  # nothing to compare, and nothing created
        from evalloop.cli.history import no_runs_yet

        raise no_runs_yet(settings)
    a, b = find_run(store, run_a, settings.database_url), find_run(store, run_b, settings.database_url)
    diff = diff_runs(store, a, b)
    if json_out:
        print(diff.model_dump_json(indent=2))
        return
    console = out()
    suites = a.suite if a.suite == b.suite else f"{a.suite} → {b.suite}"
    console.print(f"[bold]{suites}[/bold]  {a.id} → {b.id}")
    table = Table(show_edge=False, pad_edge=False)
    for col in ("scorer", "A", "A 95% CI", "B", "B 95% CI", "delta", "relative", "p", "paired",
                "newly failing", "newly passing"):
        table.add_column(col, justify="left" if col == "scorer" else "right")
    for d in diff.scorers:
        table.add_row(d.scorer, num(d.mean_a), _ci(d.ci_a), num(d.mean_b), _ci(d.ci_b),
                      "—" if d.delta is None else f"{d.delta:+.3f}",
                      "—" if d.relative is None else f"{d.relative:+.1%}",
                      "—" if d.p_value is None else f"{d.p_value:.3g}{d.stars}", str(d.common_cases),
                      str(len(d.newly_failing)), str(len(d.newly_passing)))
    console.print(table)
    for d in diff.scorers:
        for label, cases in (("newly failing", d.newly_failing), ("newly passing", d.newly_passing)):
            if cases:
                more = f" (+{len(cases) - MAX_SHOWN} more)" if len(cases) > MAX_SHOWN else ""
                console.print(f"  {d.scorer} {label}: {', '.join(cases[:MAX_SHOWN])}{more}")


def _ci(ci: tuple[float, float] | None) -> str:
    return "—" if ci is None else f"{ci[0]:.2f}–{ci[1]:.2f}"


