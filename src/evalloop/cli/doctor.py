"""``evalloop doctor``: check every store (history, run logs, memories, LLM cache), say how to
recover a damaged one, and with ``--repair`` show what it will do, ask, and do it."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer

from evalloop.cli.app import JsonOpt, ProjectOpt, app, friendly, out, settings_for


@app.command()
@friendly
def doctor(
    repair: Annotated[bool, typer.Option(
        "--repair", help="Repair damaged stores (after showing what it will do and asking): move damaged "
                         "files aside, rebuild the history from the run logs keeping schedules, keep every "
                         "readable memory, cut a partial last run-log line; then check again.")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Repair without asking.")] = False,
    json_out: JsonOpt = False,
    project: ProjectOpt = None,
) -> None:
    """Check each store evalloop keeps and say how to recover a damaged one.

    A store this user cannot open (owner, mode, read-only mount, lock) is not damaged: doctor
    says how to fix the permissions, and --repair never moves it. A repair that was killed
    midway is finished (its new file was verified) or undone (it was not) first, and said so.

    Exit 0 when every store is usable (ok, or not made yet), 1 when one is damaged, cannot be
    opened or is unreachable (after --repair: still), 2 on a usage or configuration error.

    Example: [bold]evalloop doctor --repair[/bold]
    """
    from evalloop.history.health import check_all
    from evalloop.history.repair import finish_interrupted, plan
    from evalloop.history.repair import repair as do_repair

    settings = settings_for(project)
    console = out()
    finished = finish_interrupted(settings)  # a repair killed midway: undone or finished first
    if not json_out:
        for item in finished:
            console.print(item.line(), markup=False, soft_wrap=True)
    checks = check_all(settings)
    steps, repairs = [], []
    if repair and not all(c.ok for c in checks):
        steps = plan(settings, checks)
        if not json_out:
            for step in steps:
                console.print(step.planned(), markup=False, soft_wrap=True)
        if not any(step.done for step in steps):
            if not json_out:
                console.print("nothing to repair: no store is damaged (see above for what to fix by hand)",
                              markup=False, soft_wrap=True)
        elif not yes:
            if json_out or not sys.stdin.isatty():
                print("error: doctor --repair changes files: pass --yes to repair as shown without being asked",
                      file=sys.stderr)
                raise typer.Exit(2)
            if not typer.confirm("Repair as shown?", default=False):
                console.print("nothing changed", markup=False)
                raise typer.Exit(1)
            repairs = do_repair(settings, checks)
        else:
            repairs = do_repair(settings, checks)
        if repairs:
            checks = check_all(settings)
    if json_out:
        print(json.dumps({"checks": [c.model_dump() | {"ok": c.ok} for c in checks],
                          "plan": [s.model_dump() for s in steps],
                          "repairs": [r.model_dump() for r in repairs],
                          "interrupted": [r.model_dump() for r in finished]}, indent=2))
    else:
        for item in repairs:
            console.print(item.line(), markup=False, soft_wrap=True)
        for check in checks:
            console.print(check.line(), markup=False, soft_wrap=True)
    if not all(c.ok for c in checks):
        raise typer.Exit(1)
