"""Markdown-journal delivery of generated facts: dated journal files and a core MEMORY.md."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from evalloop.retrieval.facts import Fact

SECTIONS = (
    ("What Happened", {"facts"}),
    ("People", {"entities"}),
    ("Preferences & Decisions", {"preferences", "decisions"}),
)
CORE_GROUPS = (
    ("Family", "family"),
    ("Friends & Colleagues", "friends"),
    ("Friends & Colleagues", "colleagues"),
    ("Pets", "pets"),
)


def render_journal(date: dt.date, facts: Sequence[Fact]) -> str:
    """One day's journal: title, summary line and facts grouped under section headers."""
    lines = [
        f"# {date.isoformat()}",
        "",
        "## Summary",
        f"Notes from {date.strftime('%A')} — {len(facts)} items logged.",
        "",
    ]
    for header, categories in SECTIONS:
        items = [f for f in facts if f.category in categories]
        if items:
            lines += [f"## {header}"] + [f"- {f.content}" for f in items] + [""]
    return "\n".join(lines)


def render_core_memory(facts: Sequence[Fact]) -> str:
    """MEMORY.md: the week-0 edge facts grouped the way a user curates core memories."""
    lines = ["# Core Memories", ""]
    seen: set[str] = set()
    for header, group in CORE_GROUPS:
        items = [f for f in facts if f.kind == "edge" and f.group == group]
        if not items:
            continue
        if header not in seen:
            lines.append(f"## {header}")
            seen.add(header)
        lines += [f"- {f.content}" for f in items]
    return "\n".join(lines) + "\n"


def journal_files(facts: Sequence[Fact]) -> dict[str, tuple[str, list[int]]]:
    """``path -> (markdown, fact ids in it)``: ``memory/<date>.md`` files plus ``MEMORY.md``.

    Edge facts appear both in their journal day and in MEMORY.md.
    """
    by_day: dict[dt.date, list[Fact]] = defaultdict(list)
    for f in facts:
        by_day[f.date].append(f)
    out: dict[str, tuple[str, list[int]]] = {}
    for date in sorted(by_day):
        day = by_day[date]
        out[f"memory/{date.isoformat()}.md"] = (render_journal(date, day), [f.id for f in day])
    edge = [f for f in facts if f.kind == "edge"]
    if edge:
        out["MEMORY.md"] = (render_core_memory(edge), [f.id for f in edge])
    return out


def write_journals(facts: Sequence[Fact], directory: str | Path) -> list[Path]:
    """Write the journal files under ``directory`` and return their paths."""
    root = Path(directory)
    paths = []
    for rel, (text, _) in journal_files(facts).items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        paths.append(path)
    return paths
