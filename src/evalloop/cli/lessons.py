"""``evalloop lessons promote``: a lesson folded into the prompt is no longer injected."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from evalloop.cli.app import JsonOpt, ProjectOpt, app, friendly, out, settings_for

lessons_app = typer.Typer(help="Lessons, what open incidents teach: promote them into the prompt.",
                          no_args_is_help=True)
app.add_typer(lessons_app, name="lessons")


@lessons_app.command("promote")
@friendly
def promote(
    suite: Annotated[str, typer.Argument(metavar="SUITE", help="The suite whose lessons are now in its prompt.")],
    scorer: Annotated[str | None, typer.Option("--scorer", metavar="NAME",
                                               help="Only this scorer's incident (default: every one).")] = None,
    reason: Annotated[str, typer.Option("--reason", metavar="TEXT", help="What was folded in, and where.")]
    = "folded into the prompt",
    json_out: JsonOpt = False,
    project: ProjectOpt = None,
) -> None:
    """Stop injecting the suite's lessons: they are folded into the prompt now.

    The open and held incidents become [bold]promoted[/bold]: not injected, and still kept out of
    the baseline. The next full run without them resolves them when the product is back, or
    opens them again (injected) when it regresses. Example:
    [bold]evalloop lessons promote faq --reason "rule 4 added to prompts/faq.md"[/bold]
    """
    from evalloop.learning import incidents
    from evalloop.learning.incident_records import meta
    from evalloop.learning.promotion import promote_lessons

    found = promote_lessons(settings_for(project), suite, scorer, reason)
    if json_out:
        was = [(r.id, meta(r)) for r in found]
        print(json.dumps([{"id": rid, "scorer": m.scorer if m else None, "was": m.status if m else None}
                          for rid, m in was], indent=2))
        return
    if not found:
        out().print(f"no open or held incident of {suite}{f' ({scorer})' if scorer else ''}: nothing to promote",
                    markup=False)
        return
    for record in found:
        out().print(f"promoted {record.id}: {incidents.describe(record)}", markup=False)
    out().print(f"{len(found)} lesson(s) of {suite} no longer injected; the next full run confirms them "
                "(resolved) or injects them again (a regression)", markup=False)
