"""``evalloop doctor``: check every store (history, run logs, memories, LLM cache) and say how to recover."""

from __future__ import annotations

import json

import typer

from evalloop.cli.app import JsonOpt, ProjectOpt, app, friendly, out, settings_for


@app.command()
@friendly
def doctor(json_out: JsonOpt = False, project: ProjectOpt = None) -> None:
    """Check each store evalloop keeps and say how to recover a damaged one; exit 1 if any is.

    Example: [bold]evalloop doctor[/bold]
    """
    from evalloop.health import check_all

    checks = check_all(settings_for(project))
    if json_out:
        print(json.dumps([c.model_dump() | {"ok": c.ok} for c in checks], indent=2))
    else:
        console = out()
        for check in checks:
            console.print(check.line(), markup=False, soft_wrap=True)
    if not all(c.ok for c in checks):
        raise typer.Exit(1)
