"""``evalloop doctor``: check every store (history, run logs, memories, LLM cache), say how to
recover a damaged one, and with ``--repair`` do it."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from evalloop.cli.app import JsonOpt, ProjectOpt, app, friendly, out, settings_for


@app.command()
@friendly
def doctor(
    repair: Annotated[bool, typer.Option(
        "--repair", help="Move damaged files aside, rebuild the history database from the run logs, "
                         "cut a partial last run-log line; then check again.")] = False,
    json_out: JsonOpt = False,
    project: ProjectOpt = None,
) -> None:
    """Check each store evalloop keeps and say how to recover a damaged one.

    Exit 0 when every store is usable (ok, or not made yet), 1 when one is damaged or
    unreachable (after --repair: still), 2 on a usage or configuration error.

    Example: [bold]evalloop doctor --repair[/bold]
    """
    from evalloop.history.health import check_all

    settings = settings_for(project)
    checks = check_all(settings)
    repairs = []
    if repair and not all(c.ok for c in checks):
        from evalloop.history.repair import repair as do_repair

        repairs = do_repair(settings, checks)
        checks = check_all(settings)
    if json_out:
        print(json.dumps({"checks": [c.model_dump() | {"ok": c.ok} for c in checks],
                          "repairs": [r.model_dump() for r in repairs]}, indent=2))
    else:
        console = out()
        for item in repairs:
            console.print(item.line(), markup=False, soft_wrap=True)
        for check in checks:
            console.print(check.line(), markup=False, soft_wrap=True)
    if not all(c.ok for c in checks):
        raise typer.Exit(1)
