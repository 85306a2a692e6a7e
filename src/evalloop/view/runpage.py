"""A run's page: its verdicts, and its cases filtered (failing, flipped, tag, scorer, held out, an
id pattern) and paged — a 10k-case run shows one page of cases, its filters count them all.

Whether a case passed, and whether it flipped against the run before, are what
:func:`evalloop.report.cases.case_facts` says (the one rule every command uses); this module only
chooses which of them a page shows, from every case's facts, and reads the full rows of those.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, Field

from evalloop.history.eligibility import verdict_reason
from evalloop.history.models import Run
from evalloop.report.cases import CaseFacts, CaseView
from evalloop.report.filters import CaseFilter
from evalloop.view.source import Source

PAGE_SIZE = 50
#: characters of an input, expected or output a page shows before it says how much more there is
SHOWN_CHARS = 4000


class RunFilter(BaseModel):
    """Which cases a run's page shows (its query string)."""

    failing: bool = False
    flipped: bool = False
    tag: str = ""
    scorer: str = ""
    held_out: str = ""  # "yes", "no" or "" (either)
    q: str = ""  # case id pattern: glob or substring
    page: int = Field(default=1, ge=1)

    @classmethod
    def from_query(cls, query: Mapping[str, str]) -> RunFilter:
        """From a page's query string; a value that makes no sense is dropped, never an error."""
        def flag(name: str) -> bool:
            return query.get(name, "") in ("1", "on", "yes", "true")

        try:
            page = max(1, int(query.get("page", "1")))
        except ValueError:
            page = 1
        held = query.get("held_out", "")
        return cls(failing=flag("failing"), flipped=flag("flipped"), tag=query.get("tag", "")[:200],
                   scorer=query.get("scorer", "")[:200], held_out=held if held in ("yes", "no") else "",
                   q=query.get("q", "")[:200], page=page)

    def query(self, **change: Any) -> dict[str, Any]:
        """The query string of this filter (with ``change``), for links: defaults left out."""
        data = {**self.model_dump(), **change}
        return {k: ("1" if v is True else v) for k, v in data.items()
                if v not in (False, "", None) and not (k == "page" and v == 1)}

    def keeps(self, case: CaseFacts) -> bool:
        """Whether the filter keeps a case (from its facts: every case of a run is asked)."""
        if self.q and not CaseFilter(patterns=[self.q]).keeps_id(case.case_id):
            return False
        if self.tag and self.tag not in case.tags:
            return False
        if self.held_out and (case.held_out is True) != (self.held_out == "yes"):
            return False
        if self.flipped and case.change is None:
            return False
        if self.scorer:
            grade = case.grades.get(self.scorer)
            if grade is None:
                return False
            return not (self.failing and grade.passed is not False)
        return not (self.failing and case.passed)


class ShownValue(BaseModel):
    """A value as a page prints it: text (JSON for anything else), cut at :data:`SHOWN_CHARS`."""

    text: str
    more: int = 0  # characters left out

    @classmethod
    def of(cls, value: Any, limit: int = SHOWN_CHARS) -> ShownValue | None:
        if value is None:
            return None
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=1, default=str)
        return cls(text=text[:limit], more=max(0, len(text) - limit))


class ScorerLine(BaseModel):
    """One scorer of the run: its verdict and the verdict's words."""

    scorer: str
    kind: str
    mean: float | None
    baseline: float | None
    drop: float | None
    verdict: str | None
    reason: str
    n: int
    errored: int


class RunPage(BaseModel):
    """Everything a run's page shows."""

    run: Any  # the stored Run
    previous: str | None
    scorers: list[ScorerLine]
    filter: RunFilter
    total: int  # cases in the run
    matched: int  # cases the filter keeps
    cases: list[CaseView]  # this page of them
    pages: int
    counts: dict[str, int]  # failing, flipped, held out (of the whole run)
    tags: list[str]  # every tag, most common first
    scorer_names: list[str]
    suite_found: bool

    @property
    def first(self) -> int:
        return (self.filter.page - 1) * PAGE_SIZE + 1 if self.matched else 0

    @property
    def last(self) -> int:
        return min(self.filter.page * PAGE_SIZE, self.matched)


def run_page(source: Source, run: Run, chosen: RunFilter) -> RunPage:
    """The run's page for a filter: its verdicts, the filtered cases' count (from every case's
    facts) and one page of them (only its cases' rows read in full)."""
    facts = source.facts(run)
    kept = [f for f in facts if chosen.keeps(f)]
    pages = max(1, math.ceil(len(kept) / PAGE_SIZE))
    page = min(chosen.page, pages)
    chosen = chosen.model_copy(update={"page": page})
    tags: Counter[str] = Counter(t for f in facts for t in f.tags)
    summaries = source.store.summaries(run.id)
    return RunPage(
        run=run, previous=source.previous(run), filter=chosen, total=len(facts), matched=len(kept),
        cases=source.views(run, kept[(page - 1) * PAGE_SIZE: page * PAGE_SIZE]), pages=pages,
        counts={"failing": sum(1 for f in facts if not f.passed),
                "flipped": sum(1 for f in facts if f.change is not None),
                "held out": sum(1 for f in facts if f.held_out)},
        tags=[t for t, _ in tags.most_common(200)],
        scorer_names=list(summaries) or sorted({name for f in facts[:200] for name in f.grades}),
        scorers=[ScorerLine(scorer=name, kind=s.kind, mean=s.mean, baseline=s.baseline, drop=s.drop,
                            verdict=s.verdict, reason=verdict_reason(s), n=s.n, errored=s.errored)
                 for name, s in summaries.items()],
        suite_found=source.suite(run.suite) is not None,
    )


def shown(value: Any) -> ShownValue | None:
    """A case's input, expected or output as a page prints it."""
    return ShownValue.of(value)


def page_numbers(page: int, pages: int, around: int = 2) -> Sequence[int | None]:
    """The page links to show: the first, the last, and a few around the current (None: a gap)."""
    wanted = sorted({1, pages, *range(max(1, page - around), min(pages, page + around) + 1)})
    out: list[int | None] = []
    for n in wanted:
        if out and n - (out[-1] or 0) > 1:
            out.append(None)
        out.append(n)
    return out
