"""Reading only the beginning of a YAML suite: its declared name, and its first N cases.

Finding a suite by name needs each fixture's ``name``, not its cases: :func:`declared_name` reads
the parser's events from the file as a stream and stops at the root mapping's ``name`` (a 100 MB
fixture with ``name:`` on its first line costs under a millisecond, not seconds).

A run with ``--limit N`` needs the suite's settings and its first N cases: :func:`cases_head` gives
the text of the file up to the line where case N + 1 starts, which is itself the suite with N
cases — when that is so: the cases are a block list (``- id: …`` items, not ``[…]``) and no
root key follows them (a line at the root's indentation after the cut means one might, and the
whole file is read) and the file is large (:data:`HEAD_ONLY_CHARS`; a small one is read whole, as
always). libyaml's events over 100 MB take ≈ 4 s, and loading the file ≈ 100 s, so for a large
suite JSONL (``cases: cases.jsonl``, streamed) is the format; this makes ``--limit`` cheap on a
YAML one. Such a run writes no failure memory: the held-out split groups related cases across the
whole suite, so which of the first N are held out is not known without the rest.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

__all__ = ["YAML_LOADER", "cases_head", "declared_name"]

YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present: ~10x faster

_STARTS = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
_ENDS = (yaml.MappingEndEvent, yaml.SequenceEndEvent)
_NODES = (yaml.ScalarEvent, yaml.AliasEvent, *_STARTS)


def declared_name(path: Path) -> str | None:
    """The root mapping's ``name`` of a YAML (or JSON) suite file, read from as few events as it
    takes; None when there is none, or the file cannot be read or parsed up to it."""
    try:
        with path.open(encoding="utf-8") as handle:
            depth, expecting_key, key = 0, True, None
            for ev in yaml.parse(handle, Loader=YAML_LOADER):
                if depth == 1 and isinstance(ev, _NODES):
                    if expecting_key:
                        key = ev.value if isinstance(ev, yaml.ScalarEvent) else None
                    elif key == "name":
                        return ev.value if isinstance(ev, yaml.ScalarEvent) else None
                    expecting_key = not expecting_key
                if isinstance(ev, _STARTS):
                    if depth == 0 and not isinstance(ev, yaml.MappingStartEvent):
                        return None  # not a mapping: no suite
                    depth += 1
                elif isinstance(ev, _ENDS):
                    depth -= 1
                    if depth == 0:
                        return None
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    return None


#: characters of a suite file below which it is always read whole (≈ a second of parsing above it)
HEAD_ONLY_CHARS = 1_000_000


def cases_head(text: str, limit: int) -> str | None:
    """The beginning of a YAML suite's ``text`` that holds it with only its first ``limit`` cases,
    or None when the whole text is needed (a file under :data:`HEAD_ONLY_CHARS`, fewer cases, a
    flow list, a root key after the cases, an error before the cut: the full read then says what
    is wrong)."""
    if len(text) < HEAD_ONLY_CHARS:
        return None
    depth, expecting_key, key = 0, True, None
    root_column, items, cut = 0, 0, None
    try:
        for ev in yaml.parse(text, Loader=YAML_LOADER):
            if depth == 1 and isinstance(ev, _NODES):
                if expecting_key:
                    key = ev.value if isinstance(ev, yaml.ScalarEvent) else None
                    root_column = ev.start_mark.column if ev.start_mark is not None else 0
                elif key == "cases" and not (isinstance(ev, yaml.SequenceStartEvent) and not ev.flow_style):
                    return None  # cases inline as a flow list, or a cases file: nothing to cut
                expecting_key = not expecting_key
            elif depth == 2 and key == "cases" and isinstance(ev, _NODES):
                if items == limit:
                    cut = ev.start_mark.index if ev.start_mark is not None else None  # characters
                    break
                items += 1
            if isinstance(ev, _STARTS):
                depth += 1
            elif isinstance(ev, _ENDS):
                depth -= 1
    except yaml.YAMLError:
        return None
    if cut is None:
        return None
    cut = text.rfind("\n", 0, cut) + 1  # the start of the line of case ``limit + 1``: its "- "
    while cut > 0:  # "-" alone on a line, its item on the next: the cut goes before the dash
        above = text.rfind("\n", 0, cut - 1) + 1
        if text[above:cut].split("#", 1)[0].strip() != "-":
            break
        cut = above
    # a line at the root's indentation after the cut: a root key may follow the cases (or a line
    # looks like one). The pattern starts with a literal newline, which the engine scans for fast.
    root_key = re.compile("\n" + " " * root_column + r"[^\s#-]")
    if root_key.search(text, max(cut - 1, 0)):
        return None
    return text[:cut]
