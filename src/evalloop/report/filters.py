"""Which cases a command keeps (``-k`` id patterns, ``--tag``, failed only): light enough for the
run path, which builds one before anything runs (the case rows are read by report.cases)."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable

from pydantic import BaseModel, Field


class CaseFilter(BaseModel):
    """Which cases to keep: id patterns (glob or substring, any matches), tags (all present),
    and only failing ones."""

    patterns: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    failed: bool = False

    @property
    def active(self) -> bool:
        return bool(self.patterns or self.tags or self.failed)

    def keeps_id(self, case_id: str) -> bool:
        if not self.patterns:
            return True
        return any(fnmatch.fnmatchcase(case_id, p) if any(ch in p for ch in "*?[")
                   else p in case_id for p in self.patterns)

    def keeps_tags(self, tags: Iterable[str]) -> bool:
        have = set(tags)
        return all(t in have for t in self.tags)
