"""Per-stratum tables for the terminal (the means themselves: :mod:`evalloop.history.strata`)."""

from __future__ import annotations

from rich.table import Table

from evalloop.history.strata import MAX_SCOPE_ROWS, StrataReport, StratumRow, latency_summary, strata_means

__all__ = ["StrataReport", "StratumRow", "latency_summary", "strata_means", "strata_table"]


def strata_table(report: StrataReport, title: str | None = None, *, scopes: bool = False) -> Table:
    """A rich table: one row per stratum (or per scope), then the overall and macro means."""
    table = Table(title=title, show_edge=False, pad_edge=False)
    table.add_column("scope" if scopes else "stratum")
    table.add_column("n", justify="right")
    for s in report.scorers:
        table.add_column(s, justify="right")

    def cells(means: dict[str, float | None]) -> list[str]:
        return ["—" if means.get(s) is None else f"{means[s]:.3f}" for s in report.scorers]

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
