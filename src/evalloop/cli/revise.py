"""``evalloop prompt revise``: GEPA on the learn cases, one confirmation on the held-out cases."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from evalloop.cli.app import JsonOpt, ProjectOpt, err, friendly, out, settings_for
from evalloop.cli.memories import prompt_app

if TYPE_CHECKING:
    from evalloop.loop.revise import Revision


@prompt_app.command("revise")
@friendly
def prompt_revise(
    prompt_file: Annotated[Path, typer.Argument(help="The prompt to revise (a text file the suite's target reads).")],
    suite: Annotated[str, typer.Option("--suite", "-s", help="The suite whose cases grade the prompt.")],
    write: Annotated[bool, typer.Option("--write", help="Write a confirmed candidate over PROMPT_FILE (and promote "
                                        "the lessons it folds in) instead of PROMPT_FILE.revised.")] = False,
    max_metric_calls: Annotated[int | None, typer.Option(
        "--max-metric-calls", min=1, metavar="N",
        help="The search's budget in metric calls (one case run and graded under one candidate), on the train "
             "and validation splits. Default: 10 passes over the validation split, at least 150.")] = None,
    max_cost: Annotated[float | None, typer.Option(
        "--max-cost", min=0.0, metavar="USD",
        help="The whole revision's budget in dollars (search and confirmation: the search stops early "
             "enough to pay for the confirmation).")] = None,
    validation: Annotated[float | None, typer.Option(
        "--validation", min=0.01, max=0.99, metavar="SHARE",
        help="The share of the learn cases in the validation split, on which GEPA keeps its Pareto frontier "
             "(default 0.4; the rest are the train split it reflects on).")] = None,
    minibatch: Annotated[int | None, typer.Option(
        "--minibatch", min=1, metavar="N", help="Train cases per reflection (default 3).")] = None,
    min_gain: Annotated[float | None, typer.Option(
        "--min-gain", min=0.001, max=1.0, metavar="GAIN",
        help="The gain in mean score worth having: warn before spending when the test split cannot detect it "
             "(default 0.1).")] = None,
    incident: Annotated[str | None, typer.Option(
        "--incident", metavar="ID", help="Seed reflection with this open incident's lesson (default: the suite's "
                                         "open incidents, if any; else the failing cases alone).")] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Continue the saved search of this prompt and suite "
                                         "(--max-metric-calls is then the new total).")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the splits, the budget and the test split's "
                                          "power, and stop: nothing is spent.")] = False,
    param: Annotated[str, typer.Option(help="The target parameter that names the prompt file.")] = "prompt_file",
    model: Annotated[str | None, typer.Option(help="The target's LLM model.")] = None,
    reflection_model: Annotated[str | None, typer.Option(
        "--reflection-model", metavar="MODEL", help="The reflecting model (default: the target's).")] = None,
    json_out: JsonOpt = False,
    project: ProjectOpt = None,
) -> None:
    """Evolve PROMPT_FILE with GEPA and keep the result only if it is better on cases the search never saw.

    Three grouped splits of the suite's cases: the [bold]train split[/bold] (learn cases GEPA reflects on, a
    minibatch at a time: each case's input, expected answer, the answer given and every scorer's
    feedback, with the lesson of the suite's open incident), the [bold]validation split[/bold] (learn cases
    on which GEPA keeps its Pareto frontier of candidates) and the [bold]test split[/bold] (the suite's
    held-out cases, never shown to the search). The candidate best on the validation split is
    compared with PROMPT_FILE once, paired, on the test split; only a significant gain writes
    it (PROMPT_FILE.revised, or PROMPT_FILE with --write). Before spending, the test split's
    minimum detectable effect is printed. Every revision is recorded: history/revisions/SUITE.jsonl,
    the incident, and FILE.revision.json beside a written file.

    Example: [bold]evalloop prompt revise prompts/decide.md --suite decisions --max-metric-calls 200[/bold]
    """
    import asyncio

    from evalloop.loop.revise import arevise

    settings = settings_for(project)
    if not prompt_file.is_absolute() and not prompt_file.exists() and (settings.project_dir / prompt_file).exists():
        prompt_file = settings.project_dir / prompt_file  # `-C DIR`: the path as the project names it
    updates = {k: v for k, v in {"max_metric_calls": max_metric_calls, "max_cost": max_cost,
                                 "validation": validation, "minibatch": minibatch, "min_gain": min_gain}.items()
               if v is not None}
    options = settings.revise.model_copy(update=updates)
    console = err()
    try:
        result = asyncio.run(arevise(prompt_file, suite, settings=settings, write=write, param=param, model=model,
                                     reflection_model=reflection_model, options=options, incident=incident,
                                     resume=resume, dry_run=dry_run,
                                     say=lambda line: console.print(line, markup=False, highlight=False)))
    except KeyboardInterrupt as exc:  # Ctrl-C (or SIGTERM): GEPA saved its state at the last iteration
        console.print("interrupted: nothing written; the search is saved — run again with --resume to go on",
                      markup=False, highlight=False)
        raise typer.Exit(getattr(exc, "exit_code", 130)) from None
    if json_out:
        print(result.model_dump_json(indent=2))
        return
    _print(result)


def _print(result: Revision) -> None:
    console = out()

    def say(line: str) -> None:
        console.print(line, markup=False, highlight=False)

    for notice in result.notices:
        say(f"note: {notice}")
    search = result.search
    if search is not None:
        validation = search.validation
        say(f"search: {search.iterations} iteration(s), {search.metric_calls}/{search.max_metric_calls} metric calls "
            f"({search.target_calls} run), {search.reflections} reflection(s), {search.candidates} candidate(s), "
            f"{search.frontier} on the Pareto frontier; stopped by {search.stopped}")
        if validation:
            say(f"validation split: current {validation['current']:.3f}, best {validation['best']:.3f}"
                + (" (the current prompt)" if search.best == 0 else f" (candidate {search.best})"))
    if result.confirmation is not None:
        say(result.confirmation.line())
        for name, row in result.confirmation.scorers.items():
            if row.get("diff") is not None:
                say(f"  {name}: {row['current']:.3f} → {row['candidate']:.3f} ({row['diff']:+.3f})"
                    + ("  significantly worse" if name in result.confirmation.worse else ""))
    if result.diff and result.written:
        console.print(result.diff.rstrip("\n"), markup=False, highlight=False)
    say(f"cost ${result.cost_usd:.4f}; {result.outcome}")
    if result.sidecar:
        say(f"where it came from: {result.sidecar}")
    if result.stored_with:
        say(f"recorded with incident(s) {', '.join(result.stored_with)}")
    if result.promoted:
        say(f"promoted {', '.join(result.promoted)}: their lessons are in the prompt now, no longer injected")
