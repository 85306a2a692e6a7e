"""A generated fact: the unit the synthetic corpus (:mod:`.generator`) makes and the markdown
journals (:mod:`.journal`) render, with the calendar both date it by."""

from __future__ import annotations

import datetime as dt

from pydantic import BaseModel, Field

START = dt.date(2025, 1, 6)  # a Monday: week 0, day 0 of every generated corpus


class Fact(BaseModel):
    """One generated memory with its provenance."""

    id: int
    content: str
    category: str
    week: int
    day: int
    kind: str = Field(description="template | edge | duplicate | contradiction | evolution")
    topic: str | None = None
    chain: str | None = None
    version: int | None = None
    group: str | None = None

    @property
    def date(self) -> dt.date:
        return START + dt.timedelta(days=7 * self.week + self.day)
