"""How terminal output fits its width: a table when its rows fit, stacked records when not,
and prose wrapped under its own indent.

Every command that prints rows goes through :func:`table_or_records`: a table whose columns do
not fit is never squeezed (Rich would cut names with ``…`` and fold numbers), it becomes one
record per row instead — a heading line, then the row's fields, each wrapped under an indent.
Lines of prose (a verdict's reason, a case's message, a memory) go through :func:`note`, which
wraps at spaces only (a name with hyphens stays whole) and indents the continuation lines.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

#: the narrowest column a table's prose (a description) may wrap into before records take over
PROSE_MIN = 28
#: the extra indent of a wrapped line's continuation
HANG = 2


@dataclass
class Record:
    """One row of a table, stacked: a heading and the lines below it (each may wrap)."""

    heading: str
    lines: list[str] = field(default_factory=list)
    style: str = "bold"


def fits(table: Table, console: Console) -> bool:
    """Whether the table's columns fit the console without cutting a cell that may not wrap."""
    options = console.options.update_width(100_000)
    # a column that may not wrap needs its widest cell; one that may (prose) its narrowest fit
    need = table._extra_width + sum(  # Rich's own column measure (the one its layout uses)
        (m.maximum if column.no_wrap else m.minimum)
        for column in table.columns for m in [table._measure_column(console, options, column)])
    return need <= console.width


def wrap(text: str, width: int, indent: int = 0, hang: int = HANG) -> list[str]:
    """``text`` wrapped to ``width``: the first line at ``indent``, the rest ``hang`` further in.
    Line breaks in ``text`` are kept (each paragraph wraps on its own); words never break at a
    hyphen, and only a word longer than a whole line is split."""
    out: list[str] = []
    for paragraph in text.splitlines() or [""]:
        body = paragraph.lstrip()
        lead = indent + len(paragraph) - len(body)  # a paragraph's own indent is kept, and hangs too
        lines = textwrap.wrap(body, max(width, lead + hang + 10), initial_indent=" " * lead,
                              subsequent_indent=" " * (lead + hang), break_on_hyphens=False)
        out += lines or [""]
    return out


def note(console: Console, text: str, *, indent: int = 2, hang: int = HANG, style: str | None = None) -> None:
    """Print ``text`` (plain, no markup) wrapped to the console under a hanging indent."""
    for line in wrap(text, console.width, indent, hang):
        console.print(line, markup=False, highlight=False, soft_wrap=True, style=style)


def print_records(console: Console, records: Iterable[Record], *, indent: int = 0) -> None:
    """Each record: its heading, then its lines two columns further in (wrapped under themselves)."""
    for record in records:
        note(console, record.heading, indent=indent, hang=HANG + 2, style=record.style or None)
        for line in record.lines:
            note(console, line, indent=indent + 2, hang=HANG)


def table_or_records(console: Console, table: Table, records: Sequence[Record], *, indent: int = 0) -> bool:
    """The table when it fits the console (True), else the same rows as stacked records (False)."""
    if fits(table, console):
        console.print(table)
        return True
    print_records(console, records, indent=indent)
    return False
