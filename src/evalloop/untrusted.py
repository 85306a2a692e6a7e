"""Untrusted text in prompts: fenced between named markers, with look-alike markers defused.

Outputs of the system under test and memories are data. A judge prompt puts each between
``<<<NAME>>>`` and ``<<<END NAME>>>`` lines; anything inside that looks like a marker (any
``<<<`` or ``>>>`` run, in any case or spacing) is rewritten so that it cannot close the fence
or open a new one.
"""

from __future__ import annotations

import re

_MARKERISH = re.compile(r"<\s*<\s*<|>\s*>\s*>")


def defuse(text: str) -> str:
    """Rewrite marker look-alikes (``<<<`` / ``>>>``, spaced or not) inside untrusted text."""
    return _MARKERISH.sub(lambda m: "‹‹‹" if m.group(0).startswith("<") else "›››", text)


def fence(name: str, text: str) -> str:
    """``text`` between ``<<<NAME>>>`` and ``<<<END NAME>>>`` lines, defused."""
    label = re.sub(r"[^A-Z0-9 ]", "", name.upper()) or "TEXT"
    return f"<<<{label}>>>\n{defuse(str(text))}\n<<<END {label}>>>"
