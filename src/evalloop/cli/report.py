"""``evalloop report``: trends of stored runs as HTML (with charts), Markdown, JSON or a table."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from evalloop.cli.app import (
    FailOpt,
    JsonOpt,
    NoFailOpt,
    ProjectOpt,
    app,
    err,
    fails_on_regression,
    friendly,
    out,
    settings_for,
)
from evalloop.errors import EvalloopError

if TYPE_CHECKING:
    from evalloop.report.trends import TrendReport

#: evalloop.report.trends.DEFAULT_LAST (a test keeps them equal; trends imports the history models)
DEFAULT_LAST = 20


@app.command()
@friendly
def report(
    suite: Annotated[list[str] | None, typer.Option(
        "--suite", "-s", help="Suite to report on. Repeat for several (default: every suite).")] = None,
    all_suites: Annotated[bool, typer.Option("--all", help="Every suite with runs (the default).")] = False,
    html: Annotated[Path | None, typer.Option(
        "--html", help="Write a self-contained HTML report with trend charts to this file.",
        dir_okay=False)] = None,
    markdown: Annotated[bool, typer.Option(
        "--markdown", help="Print a Markdown summary (for a pull-request comment).")] = False,
    markdown_file: Annotated[Path | None, typer.Option(
        "--markdown-file", help="Write the Markdown summary to this file.", dir_okay=False)] = None,
    last: Annotated[int, typer.Option(min=1, max=500, help="How many recent runs per suite.")] = DEFAULT_LAST,
    title: Annotated[str, typer.Option(help="Title of the HTML/Markdown report.")] = "evalloop report",
    fail_on_regression: FailOpt = False,
    no_fail: NoFailOpt = False,
    json_out: JsonOpt = False,
    project: ProjectOpt = None,
) -> None:
    """Report score trends over the last runs: rolling baseline band, threshold, flipped cases.

    Exit 1 when the latest run of a suite failed its verdict (as `evalloop run` does), unless
    --no-fail-on-regression.

    Example: [bold]evalloop report --suite similarity --html report.html[/bold]
    """
    from evalloop.history.runlog import synced_store
    from evalloop.report.trends import build_trends

    failing = fails_on_regression(fail_on_regression, no_fail)
    settings = settings_for(project)
    names = None if all_suites else (suite or None)
    store = synced_store(settings.database_url, settings.history_dir, run_log=settings.run_log,
                         suites=names, create=False)
    if store is None:  # nothing to report, and nothing created
        raise EvalloopError("no history yet", where=str(settings.history_dir),
                            hint="run a suite first: evalloop run --suite NAME")
    trends = build_trends(store, names, last=last, window=settings.window,
                          memory_file=settings.memory_file)
    if html is not None:
        from evalloop.report.html import write_html

        write_html(trends, html, title=title)
        err().print(f"wrote {html}")
    if markdown or markdown_file is not None:
        from evalloop.report.markdown import render_markdown

        text = render_markdown(trends, title=title)
        if markdown_file is not None:
            markdown_file.parent.mkdir(parents=True, exist_ok=True)
            markdown_file.write_text(text, encoding="utf-8")
            err().print(f"wrote {markdown_file}")
        if markdown:
            print(text, end="")
    if json_out:
        print(trends.model_dump_json(indent=2))
    if html is None and not markdown and markdown_file is None and not json_out:
        _print_table(trends)
    if failing and trends.failing_suites:
        err().print(f"failing (regressed, scorer broken or invalid run): "
                    f"{', '.join(s.suite for s in trends.failing_suites)}")
        raise typer.Exit(1)


def _print_table(trends: TrendReport) -> None:
    from rich.table import Table

    from evalloop.report.format import num, pct
    from evalloop.report.layout import Record, table_or_records
    from evalloop.report.markdown import sparkline
    from evalloop.report.terminal import VERDICT_STYLE

    table = Table(show_edge=False, pad_edge=False)
    for col in ("suite", "scorer", "runs", "latest", "baseline", "drop", "verdict", "trend"):
        table.add_column(col, no_wrap=True)
    records = []
    for s in trends.suites:
        if not s.runs:
            table.add_row(s.suite, "", "0", "", "", "", s.progress_note or "no finished run yet", "")
            records.append(Record(s.suite, [s.progress_note or "no finished run yet"]))
        for t in s.scorers:
            p = t.latest
            verdict = (p.verdict if p else None) or ""
            style = VERDICT_STYLE.get(verdict, "")
            trend = sparkline([q.mean for q in t.points])
            table.add_row(s.suite, t.scorer, str(len(t.points)), num(p.mean if p else None),
                          num(p.baseline if p else None), pct(p.drop if p else None),
                          f"[{style}]{verdict}[/]" if style else verdict, trend)
            records.append(Record(f"{s.suite}: {t.scorer}", [
                f"latest {num(p.mean if p else None)} · baseline {num(p.baseline if p else None)} · "
                f"drop {pct(p.drop if p else None)} · {verdict or '—'} · {len(t.points)} runs {trend}"]))
    table_or_records(out(), table, records)
