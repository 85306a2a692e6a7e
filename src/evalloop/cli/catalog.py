"""``evalloop suites list|validate`` and ``evalloop scorers list``."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from evalloop.cli.app import JsonOpt, ProjectOpt, err, friendly, out, scorers_app, settings_for, suites_app


@suites_app.command("list")
@friendly
def suites_list(json_out: JsonOpt = False, project: ProjectOpt = None) -> None:
    """List the suites of the project (fixtures/) and the ones that ship with evalloop."""
    from rich.markup import escape
    from rich.table import Table

    from evalloop.report.layout import PROSE_MIN, Record, table_or_records
    from evalloop.suites.lookup import discover_suites
    from evalloop.suites.models import PACKAGE_FIXTURES, load_suite

    settings = settings_for(project)
    found = discover_suites(settings.project_dir)
    rows: list[dict[str, Any]] = []
    for name, path in sorted(found.items()):
        origin = "shipped" if path.parent == PACKAGE_FIXTURES else "project"
        try:
            suite = load_suite(path)
            rows.append({"name": name, "origin": origin, "path": str(path),
                         "description": suite.description, "target": suite.target.ref,
                         "scorers": suite.scorer_labels, "error": None})
        except Exception as exc:  # listed, with the error, so one bad file does not hide others
            rows.append({"name": name, "origin": origin, "path": str(path), "description": "",
                         "target": "", "scorers": [], "error": str(exc)})
    if json_out:
        print(json.dumps(rows, indent=2))
        return
    table = Table(show_edge=False, pad_edge=False)
    for col in ("suite", "origin", "scorers", "description"):
        table.add_column(col, no_wrap=col in ("suite", "origin"),
                         min_width=PROSE_MIN if col == "description" else None)
    records = []
    for row in rows:
        error, description, scorers = row["error"], str(row["description"] or ""), ", ".join(row["scorers"])
        table.add_row(row["name"], row["origin"], scorers,
                      f"[red]{escape(error)}[/red]" if error else escape(description))
        records.append(Record(f"{row['name']} ({row['origin']})",
                              [f"error: {error}" if error else description, f"scorers: {scorers or '—'}"]))
    table_or_records(out(), table, records)


@suites_app.command("validate")
@friendly
def suites_validate(
    names: Annotated[list[str] | None, typer.Argument(help="Suite names or files (default: all).")] = None,
    project: ProjectOpt = None,
) -> None:
    """Check suites fully (cases, scorers and their params, target) without running them.

    A suite file is YAML or JSON with: name, description, target (module:function or
    {ref, params}), scorers (names, or {name, params, threshold}), optional thresholds,
    concurrency, epochs, timeout, window, and cases (inline, or a JSONL file path). Each case
    has id, input, expected, and optional tags, metadata, expect (pass|fail), group (cases kept on one
    side of the held-out split).
    """
    from evalloop.run.runner import prepare
    from evalloop.scoring.registry import discover
    from evalloop.suites.lookup import discover_suites, find_suite

    settings = settings_for(project)
    registry = discover(settings.project_dir)
    targets = names or sorted(discover_suites(settings.project_dir))
    for name in targets:
        suite = find_suite(name, settings.project_dir)
        prepared = prepare(suite, registry, project_dir=settings.project_dir)
        out().print(f"ok  {suite.name}: {prepared.n_cases} cases, "
                    f"{len(prepared.scorers)} scorers, target {suite.target.ref}")
        near = suite.near_duplicate_notice()
        if near:
            err().print(f"warning: {near}", markup=False, soft_wrap=True, highlight=False)


@scorers_app.command("list")
@friendly
def scorers_list(json_out: JsonOpt = False, project: ProjectOpt = None) -> None:
    """List every registered scorer: name, kind, threshold, source, description."""
    from rich.markup import escape
    from rich.table import Table

    from evalloop.report.layout import PROSE_MIN, Record, table_or_records
    from evalloop.scoring.registry import discover

    settings = settings_for(project)
    registry = discover(settings.project_dir)
    rows = [{"name": s.name, "kind": s.kind.value, "threshold": s.effective_threshold,
             "source": s.source, "params": list(s.params), "description": s.description}
            for s in registry]
    if json_out:
        print(json.dumps(rows, indent=2))
        return
    table = Table(show_edge=False, pad_edge=False)
    for col in ("scorer", "kind", "threshold", "source", "description"):
        table.add_column(col, no_wrap=col != "description", min_width=PROSE_MIN if col == "description" else None)
    records = []
    for row in rows:
        table.add_row(row["name"], row["kind"], f"{row['threshold']:.0%}", escape(row["source"]),
                      escape(row["description"]))
        records.append(Record(f"{row['name']}  {row['kind']} · {row['threshold']:.0%} · {row['source']}",
                              [row["description"]] if row["description"] else []))
    table_or_records(out(), table, records)
