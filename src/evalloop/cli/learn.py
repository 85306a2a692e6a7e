"""``evalloop learn check``: whether injecting failure memories makes the next run better."""

from __future__ import annotations

from typing import Annotated

import typer

from evalloop.cli.app import JsonOpt, ProjectOpt, app, friendly, out, settings_for

learn_app = typer.Typer(help="Measure the learning loop.", no_args_is_help=True)
app.add_typer(learn_app, name="learn")


@learn_app.command("check")
@friendly
def learn_check(
    suite: Annotated[str, typer.Option("--suite", "-s", help="Suite name or file.")],
    variant: Annotated[list[str] | None, typer.Option(
        "--variant", "-V", help="name:key=value,... (inject=off|ids|full, or a target parameter). "
        "Repeat; the first is the reference. Default: none:inject=off ids:inject=ids full:inject=full.")] = None,
    on: Annotated[str, typer.Option(
        "--on", metavar="PART", help="held-out: only the cases no lesson was built from (the default: "
        "generalisation); all: every case, learn cases included (labelled).")] = "held-out",
    limit: Annotated[int | None, typer.Option(min=1, help="Only the first N cases.")] = None,
    engine: Annotated[str | None, typer.Option(help="auto, local or llm.")] = None,
    model: Annotated[str | None, typer.Option(help="The target's LLM model.")] = None,
    json_out: JsonOpt = False,
    project: ProjectOpt = None,
) -> None:
    """Run SUITE as variants on the same cases and print each one's paired difference from the first.

    By default only the held-out cases run: a gain there is generalisation. Nothing is stored:
    the runs go to a throw-away history and no memory is written.

    Example: [bold]evalloop learn check -s similarity[/bold]
    """
    import asyncio

    from rich.table import Table

    from evalloop.loop.learncheck import DEFAULT_VARIANTS, acheck
    from evalloop.report.format import num
    from evalloop.verdicts.stats import stars

    settings = settings_for(project)
    result = asyncio.run(acheck(suite, settings=settings, variants=variant or list(DEFAULT_VARIANTS),
                                limit=limit, engine=engine, model=model, on=on))
    if json_out:
        print(result.model_dump_json(indent=2))
        return
    console = out()
    part = (f"on held-out cases: {result.n_cases} (never in a lesson; split {result.split})"
            if result.on == "held-out" else
            f"on all {result.n_cases} cases, {result.n_cases - result.held_out} of them learn cases "
            f"(a lesson may show them: recall, not generalisation)")
    console.print(f"[bold]{result.suite}[/bold]  {part}", markup=True, highlight=False)
    console.print(f"{len(result.open_memories)} open failure memories  reference: {result.reference}")
    table = Table(show_edge=False, pad_edge=False)
    table.add_column("variant")
    for s in result.scorers:
        table.add_column(s, justify="right")
    for r in result.results:
        cells = []
        for s in result.scorers:
            mean = r.means.get(s)
            text = num(mean)
            if r.variant != result.reference and r.diff.get(s) is not None:
                p = r.p_value.get(s)
                text += f" ({r.diff[s]:+.3f}, p={p:.3g}{stars(p)})" if p is not None else f" ({r.diff[s]:+.3f})"
            cells.append(text)
        table.add_row(r.variant, *cells)
    console.print(table)
    from evalloop.report.layout import note

    note(console, result.claim(), indent=0, style="bold" if result.mechanics else None)
