"""``evalloop memories find|list``, ``evalloop prompt enhance``: the learning loop by hand (``prompt revise``:
:mod:`evalloop.cli.revise`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from evalloop.cli.app import JsonOpt, ProjectOpt, app, err, friendly, out, settings_for
from evalloop.errors import EvalloopError

if TYPE_CHECKING:
    from evalloop.suites.models import Suite

memories_app = typer.Typer(help="Find and list memories in the memory store (failure memories included).",
                           no_args_is_help=True)
prompt_app = typer.Typer(help="Improve prompts with what past runs learned.", no_args_is_help=True)
app.add_typer(memories_app, name="memories")
app.add_typer(prompt_app, name="prompt")

#: the default of `prompt enhance --limit`: evalloop.learning.injection.PATTERN_LIMIT (a test keeps them equal;
#: importing learning here would slow every command's start-up)
PATTERN_LIMIT = 3
TagOpt = Annotated[list[str] | None, typer.Option("--tag", "-t", help="Only memories with this tag (repeat: all).")]


def _rows(found: list) -> list[dict]:
    from evalloop.learning import incidents as learning

    rows = []
    for item in found:
        record = getattr(item, "record", item)
        rows.append({"id": record.id, "score": getattr(item, "score", None), "tags": record.tags,
                     "metadata": record.metadata, "information": record.information,
                     "incident": learning.describe(record),
                     "created_at": record.created_at.isoformat() if getattr(record, "created_at", None) else None})
    return rows


def _print(rows: list[dict], json_out: bool) -> None:
    """Each memory stacked (a table would squeeze its text into a narrow column): its id, score
    and date, its tags, then its text wrapped to the terminal, a blank line between memories."""
    from evalloop.report.layout import Record, print_records

    if json_out:
        print(json.dumps(rows, indent=2, default=str))
        return
    if not rows:
        out().print("no memories found")
        return
    console = out()
    for i, row in enumerate(rows):
        head = [row["id"]]
        if row["score"] is not None:
            head.append(f"score {row['score']:.3f}")
        if row["created_at"]:
            head.append(str(row["created_at"])[:16].replace("T", " "))
        if i:
            console.print()
        lines = [f"tags: {', '.join(row['tags']) or '—'}"]
        if row["incident"]:
            lines.append(f"incident — {row['incident']}")
        print_records(console, [Record("  ".join(head), [*lines, row["information"]])])


@memories_app.command("find")
@friendly
def memories_find(
    query: Annotated[str, typer.Argument(help="What to look for, in plain words.")],
    limit: Annotated[int, typer.Option(min=1, help="How many results.")] = 5,
    tag: TagOpt = None,
    json_out: JsonOpt = False,
    project: ProjectOpt = None,
) -> None:
    """Hybrid (full-text + meaning) search of the memory store.

    Example: [bold]evalloop memories find "memory similarity eval failure" --limit 3[/bold]
    """
    from evalloop.learning import injection

    settings = settings_for(project)
    if not injection.has_memories(settings):  # nothing learned yet: nothing to find (and nothing created)
        _print([], json_out)
        return
    adapter = injection.open_adapter(settings, readonly=True)
    try:
        _print(_rows(adapter.find(query, limit=limit, tags=tag or None)), json_out)
    finally:
        injection.close_adapter(adapter)


@memories_app.command("list")
@friendly
def memories_list(
    tag: TagOpt = None,
    limit: Annotated[int, typer.Option(min=1, help="How many memories.")] = 50,
    json_out: JsonOpt = False,
    project: ProjectOpt = None,
) -> None:
    """List memories newest first, filtered by exact tags (embedded store, or a memory service's
    `GET /memories`).

    Example: [bold]evalloop memories list --tag suite:similarity --tag status:open[/bold]
    """
    from evalloop.learning import injection

    settings = settings_for(project)
    if not injection.has_memories(settings):  # nothing learned yet: an empty list (and nothing created)
        _print([], json_out)
        return
    adapter = injection.open_adapter(settings, readonly=True)
    try:
        _print(_rows(adapter.list(tags=tag or None, limit=limit)), json_out)
    finally:
        injection.close_adapter(adapter)


@prompt_app.command("enhance")
@friendly
def prompt_enhance(
    prompt_file: Annotated[Path, typer.Argument(help="The prompt to improve (a text file).")],
    suite: Annotated[str, typer.Option("--suite", "-s", help="Whose failure memories to use.")],
    limit: Annotated[int, typer.Option(min=1, help="How many failure memories.")] = PATTERN_LIMIT,
    query: Annotated[str | None, typer.Option(
        metavar="TEXT", help="Only the suite's failure memories the memory store finds for TEXT (full "
                             "text and meaning), best match first (default: all of them, newest first).")] = None,
    project: ProjectOpt = None,
) -> None:
    """Print PROMPT_FILE with the suite's open failure memories, fenced and within the injection budget.

    Example: [bold]evalloop prompt enhance prompts/decide.md --suite similarity[/bold]
    """
    from evalloop.learning import injection

    settings = settings_for(project)
    try:
        base = prompt_file.read_text(encoding="utf-8")
    except OSError as exc:
        raise EvalloopError(f"cannot read prompt file: {exc.strerror}", where=str(prompt_file)) from None
    from evalloop.suites.lookup import find_suite

    try:  # the suite itself, so that an incident showing one of its held-out cases is left out
        which: str | Suite = find_suite(suite, settings.project_dir)
    except EvalloopError:
        which = suite  # a suite no longer in the project: its incidents as stored
    found: list = []
    if injection.has_memories(settings):
        adapter = injection.open_adapter(settings)
        try:
            found = injection.failure_patterns(adapter, which, query=query, limit=limit)
        finally:
            injection.close_adapter(adapter)
    if not found:
        matching = f" matching {query!r}" if query else ""
        err().print(f"no failure memories for suite '{suite}'{matching}: the prompt is unchanged", markup=False)
    print(injection.enhance_prompt(base, found, budget=settings.inject_budget,
                                  per_memory=settings.inject_per_memory, detail=settings.inject_detail), end="")
