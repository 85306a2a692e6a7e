"""Per-stratum tables for the terminal (the means themselves: :mod:`evalloop.history.strata`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table

from evalloop.history.strata import MAX_SCOPE_ROWS, StrataReport, StratumRow, latency_summary, strata_means
from evalloop.report.format import num
from evalloop.report.layout import Record, note, print_records, table_or_records

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["StrataReport", "StratumRow", "latency_summary", "print_strata", "strata_means", "strata_table"]


def strata_table(report: StrataReport, title: str | None = None, *, scopes: bool = False) -> Table:
    """A rich table: one row per stratum (or per scope), then the overall and macro means."""
    table = Table(title=title, show_edge=False, pad_edge=False)
    table.add_column("scope" if scopes else "stratum", no_wrap=True)
    table.add_column("n", justify="right", no_wrap=True)
    for s in report.scorers:
        table.add_column(s, justify="right", no_wrap=True)

    def cells(means: dict[str, float | None]) -> list[str]:
        return [num(means.get(s)) for s in report.scorers]

    rows = report.scopes if scopes else report.strata
    shown = rows
    if scopes and len(rows) > MAX_SCOPE_ROWS:  # LongMemEval: one scope per question
        first = report.scorers[0] if report.scorers else None
        shown = report.lowest_scopes(MAX_SCOPE_ROWS)
        table.caption = (f"the {MAX_SCOPE_ROWS} lowest of {len(rows)} scopes by {first}; "
                         "all of them in --json (strata.scopes)")
    for row in shown:
        table.add_row(row.tag, str(row.n), *cells(row.means))
    table.add_row("[bold]overall[/]", str(report.n), *cells(report.overall))
    if len(rows) > 1:
        table.add_row("macro", str(len(rows)), *cells(report.scope_macro if scopes else report.macro))
    return table


def print_strata(console: Console, report: StrataReport, title: str, *, scopes: bool = False) -> None:
    """The table when its columns (one per scorer) fit the console, else one record per stratum
    (or scope): its n and each scorer's mean on a line that wraps."""
    table = strata_table(report, title, scopes=scopes)
    if table_or_records(console, table, []):
        return
    note(console, title + (f" ({table.caption})" if table.caption else ""), indent=0, style="bold")
    rows = report.scopes if scopes else report.strata
    shown = report.lowest_scopes(MAX_SCOPE_ROWS) if scopes and len(rows) > MAX_SCOPE_ROWS else rows
    named = [(row.tag, row.n, row.means) for row in shown] + [("overall", report.n, report.overall)]
    if len(rows) > 1:
        named.append(("macro", len(rows), report.scope_macro if scopes else report.macro))

    def means(values: dict[str, float | None]) -> str:  # the scorers that graded the stratum
        return " · ".join(f"{s} {v:.3f}" for s in report.scorers if (v := values.get(s)) is not None) or "—"

    print_records(console, [Record(f"{tag} (n {n})", [means(values)], style="") for tag, n, values in named],
                  indent=2)
