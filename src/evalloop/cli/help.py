"""How ``evalloop --help`` reads: commands in the order a user needs them, grouped in panels, and
help texts as flowing paragraphs (a docstring's line breaks are its source's, not the reader's)."""

from __future__ import annotations

import inspect
from typing import Any

from typer.core import TyperGroup

#: the commands of a day's work, in the order a newcomer meets them
FIRST = ("init", "run", "show", "compare", "history", "report", "view")
#: the panel of every other command, panels in this order
PANELS = {
    "suites": "Suites and scorers", "scorers": "Suites and scorers", "calibrate": "Suites and scorers",
    "memories": "The learning loop", "failures": "The learning loop", "prompt": "The learning loop",
    "learn": "The learning loop", "lessons": "The learning loop",
    "schedule": "Scheduling", "scheduler": "Scheduling",
    "bench": "Memory-system benchmarks", "compare-targets": "Memory-system benchmarks",
    "doctor": "Maintenance",
}
_PANEL_ORDER = list(dict.fromkeys(PANELS.values()))


def flow(text: str | None) -> str | None:
    """``text`` with each paragraph on one line: single line breaks become spaces, blank lines
    stay paragraph breaks (and a paragraph Click marks with ``\\b`` keeps its lines)."""
    if not text:
        return text
    paragraphs = inspect.cleandoc(text).split("\n\n")
    return "\n\n".join(p if p.startswith("\b") else " ".join(p.split()) for p in paragraphs)


def _plain(command: Any) -> None:
    """Flow the help of ``command``, its parameters, and every command below it."""
    command.help = flow(command.help)
    command.short_help = flow(command.short_help)
    for param in command.params:
        if getattr(param, "help", None):
            param.help = flow(param.help)
    for sub in getattr(command, "commands", {}).values():
        _plain(sub)


class RootGroup(TyperGroup):
    """The top-level ``evalloop`` group: ordered, grouped commands with flowing help."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _plain(self)
        for name, command in self.commands.items():
            if name in PANELS:
                # Typer's commands carry rich_help_panel; click's Command type does not declare it
                command.rich_help_panel = PANELS[name]  # type: ignore[attr-defined]

    def list_commands(self, ctx: Any) -> list[str]:
        names = list(self.commands)
        rank = {name: i for i, name in enumerate(FIRST)}

        def key(name: str) -> tuple[int, int, int]:
            if name in rank:
                return (0, rank[name], 0)
            panel = PANELS.get(name)
            if panel is None:
                return (1, len(_PANEL_ORDER), names.index(name))
            return (1, _PANEL_ORDER.index(panel), list(PANELS).index(name))

        return sorted(names, key=key)
