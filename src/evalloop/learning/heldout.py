"""Held-out cases and failure memories: which cases an incident may show, and an incident read
without the held-out ones.

The split itself is the suite's (:class:`evalloop.suites.models.Holdout`). The lifecycle
(:mod:`evalloop.learning.incidents`) never remembers a held-out case; injection
(:mod:`evalloop.learning.injection`) never injects an incident that shows one. Both read these
two functions, so "what an incident may show" has one definition.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any


def remembered(record: Any) -> set[str]:
    """Every case an incident's text or corrections may show: its remembered cases
    (``failing_cases``), the cases its text shows (``still_failing``) and its corrections' cases."""
    meta = getattr(record, "metadata", None) or {}
    ids = set(meta.get("failing_cases") or []) | set(meta.get("still_failing") or [])
    return ids | {str(c.get("id")) for c in meta.get("corrections") or [] if isinstance(c, dict)}


def without_held_out(record: Any, held: Collection[str]) -> Any:
    """A stored incident as the lifecycle reads it: held-out cases dropped from what it remembers
    (an incident written before the split, or under another one). When its text may show one,
    ``rewrite`` is set: the next update writes the text again from learn cases."""
    if not held:
        return record
    meta = record.metadata
    drop = set(held)
    clean = {**meta, "failing_cases": [c for c in meta.get("failing_cases") or [] if c not in drop],
             "chronic_cases": [c for c in meta.get("chronic_cases") or [] if c not in drop],
             "corrections": [c for c in meta.get("corrections") or []
                             if isinstance(c, dict) and c.get("id") not in drop]}
    if remembered(record) & drop:
        clean["rewrite"] = True
    return record.model_copy(update={"metadata": clean})
