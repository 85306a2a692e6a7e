"""Two runs compared case by case: the run-level test per scorer (``evalloop compare``'s own
statistics, :func:`evalloop.report.diff.diff_runs`: both means with their intervals, the paired
test's p) and the paired table of cases, the newly failing first, then by how much each case moved,
each with a word-level diff of its two outputs."""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Sequence
from typing import Any, NamedTuple

from pydantic import BaseModel

from evalloop.history.models import Run
from evalloop.report.cases import CaseFacts, CaseView
from evalloop.report.diff import RunDiff, diff_runs
from evalloop.view.runpage import PAGE_SIZE, SHOWN_CHARS, ShownValue
from evalloop.view.source import Source

#: the order of a case's change in the table: what a reader must see first, first
RANK = {"newly failing": 0, "newly passing": 1, "still failing": 2, "still passing": 3, "only in A": 4,
        "only in B": 4}
_TOKENS = re.compile(r"\s+|\w+|[^\w\s]")


class ScoreMove(BaseModel):
    scorer: str
    a: float | None
    b: float | None

    @property
    def delta(self) -> float | None:
        return None if self.a is None or self.b is None else self.b - self.a


class Move(NamedTuple):
    """One case in both runs, from their facts: what the table is sorted and counted by."""

    case_id: str
    change: str  # a key of RANK
    move: float | None  # the mean of the scorers' deltas (B − A); None: not graded in both
    a: CaseFacts | None
    b: CaseFacts | None

    @property
    def key(self) -> tuple[int, float, str]:
        return (RANK[self.change], -abs(self.move or 0.0), self.case_id)


class CaseMove(BaseModel):
    """One case of the table's page: whether it passed in each run, each scorer's two values, the
    move, both runs' full views of it and the diff of its outputs."""

    case_id: str
    change: str  # a key of RANK
    move: float | None
    scores: list[ScoreMove]
    a: CaseView | None
    b: CaseView | None
    diff: list[tuple[str, str]] = []  # ("=", "-" or "+", text): B's output against A's


class ComparePage(BaseModel):
    run_a: Any
    run_b: Any
    stats: RunDiff
    cases: list[CaseMove]  # this page
    total: int
    counts: dict[str, int]
    page: int
    pages: int
    changed_only: bool


def moves(a_facts: Sequence[CaseFacts], b_facts: Sequence[CaseFacts]) -> list[Move]:
    """Every case of either run, paired by id, in the table's order (from the runs' facts: no
    output is read for the cases a page does not show)."""
    a_by, b_by = {f.case_id: f for f in a_facts}, {f.case_id: f for f in b_facts}
    out = []
    for case_id in dict.fromkeys([*b_by, *a_by]):
        a, b = a_by.get(case_id), b_by.get(case_id)
        if a is None or b is None:
            change = "only in B" if a is None else "only in A"
            deltas: list[float] = []
        else:
            if a.passed != b.passed:
                change = "newly failing" if a.passed else "newly passing"
            else:
                change = "still passing" if b.passed else "still failing"
            deltas = [g.value - other.value for name, g in b.grades.items()
                      if g.value is not None and (other := a.grades.get(name)) is not None
                      and other.value is not None]
        out.append(Move(case_id, change, sum(deltas) / len(deltas) if deltas else None, a, b))
    return sorted(out, key=lambda m: m.key)


def _score_moves(m: Move) -> list[ScoreMove]:
    a = {n: g.value for n, g in m.a.grades.items()} if m.a else {}
    b = {n: g.value for n, g in m.b.grades.items()} if m.b else {}
    return [ScoreMove(scorer=n, a=a.get(n), b=b.get(n)) for n in dict.fromkeys([*b, *a])]


def word_diff(before: Any, after: Any, limit: int = SHOWN_CHARS) -> list[tuple[str, str]]:
    """B's output against A's, word by word: ``("=", text)`` kept, ``("-", text)`` only in A,
    ``("+", text)`` only in B (each output cut at ``limit`` characters)."""
    old, new = (ShownValue.of(v, limit) for v in (before, after))
    a_words = _TOKENS.findall(old.text) if old else []
    b_words = _TOKENS.findall(new.text) if new else []
    out: list[tuple[str, str]] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a_words, b_words, autojunk=False).get_opcodes():
        if op == "equal":
            out.append(("=", "".join(a_words[i1:i2])))
            continue
        if i2 > i1:
            out.append(("-", "".join(a_words[i1:i2])))
        if j2 > j1:
            out.append(("+", "".join(b_words[j1:j2])))
    return out


def compare_page(source: Source, a: Run, b: Run, page: int = 1, changed_only: bool = False) -> ComparePage:
    """The comparison of run ``b`` with run ``a``: the statistics and one page of the paired table
    (sorted from both runs' facts; the full rows read for that page's cases only)."""
    def compute() -> tuple[RunDiff, list[Move]]:
        return (diff_runs(source.store, a, b, interval=source.interval),
                moves(source.facts(a, changes=False), source.facts(b, changes=False)))

    stats, every = source.pair(a, b, compute)
    counts = dict.fromkeys(RANK, 0)
    for m in every:
        counts[m.change] += 1
    counts["moved"] = sum(1 for m in every if m.move)
    shown = [m for m in every if m.change in ("newly failing", "newly passing") or m.move] if changed_only else every
    pages = max(1, math.ceil(len(shown) / PAGE_SIZE))
    page = min(max(page, 1), pages)
    chosen = shown[(page - 1) * PAGE_SIZE: page * PAGE_SIZE]
    a_views = {v.case_id: v for v in source.views(a, [m.a for m in chosen if m.a is not None])}
    b_views = {v.case_id: v for v in source.views(b, [m.b for m in chosen if m.b is not None])}
    cases = []
    for m in chosen:
        va, vb = a_views.get(m.case_id), b_views.get(m.case_id)
        cases.append(CaseMove(case_id=m.case_id, change=m.change, move=m.move, scores=_score_moves(m), a=va, b=vb,
                              diff=word_diff(va.error or va.output, vb.error or vb.output) if va and vb else []))
    return ComparePage(run_a=a, run_b=b, stats=stats, cases=cases, total=len(shown), counts=counts,
                       page=page, pages=pages, changed_only=changed_only)
