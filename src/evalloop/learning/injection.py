"""The memory store the settings name, and which failure memories enter a prompt, and how.

:func:`failure_patterns` chooses what enters a prompt: the suite's open incidents
(:mod:`evalloop.learning.incidents`), newest first — looked up by metadata, not by similarity;
resolved and accepted ones never do, and neither does one that remembers a held-out case of the
suite (:func:`lesson_records`). :func:`injected_for` renders them for a run within the
settings' budget (:func:`evalloop.learning.feedback.injection`: fenced, capped).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from pydantic import BaseModel

from evalloop.config import Settings
from evalloop.errors import EvalloopError
from evalloop.learning import feedback
from evalloop.learning.heldout import remembered
from evalloop.learning.incident_records import LessonRecord, lesson_record, lesson_text, stored
from evalloop.learning.incidents import KIND, incidents
from evalloop.memory.records import FoundMemory, MemoryRecord
from evalloop.suites.models import Suite

if TYPE_CHECKING:  # the HTTP adapter's module loads httpx: imported where an adapter is opened
    from evalloop.memory.adapters import MemoryAdapter

PATTERN_LIMIT = 3
MAX_LESSONS = 200  # open incidents a query ranks among
HEADING = "Past failure patterns:"


@runtime_checkable
class Closes(Protocol):
    """An adapter that holds something to release (a file, a connection)."""

    def close(self) -> None: ...


def open_adapter(settings: Settings, *, readonly: bool = False) -> MemoryAdapter:
    """The memory adapter the settings name: the embedded store, or an HTTP memory service.
    ``readonly``: for commands that only read (the embedded store's file is opened read-only,
    so they work on a history this user may not write)."""
    if settings.memory_url:
        from evalloop.memory.adapters import HTTPMemoryAdapter, HTTPMemoryConfig

        return HTTPMemoryAdapter(HTTPMemoryConfig(base_url=settings.memory_url, **settings.memory_http))
    from evalloop.memory.store import MemoryStore

    return MemoryStore(settings.memory_file, readonly=readonly)  # a damaged file: one StoreError line naming it


def close_adapter(adapter: MemoryAdapter) -> None:
    if isinstance(adapter, Closes):
        adapter.close()


def lesson_records(adapter: MemoryAdapter, suite: str | Suite,
                   limit: int = PATTERN_LIMIT) -> tuple[list[MemoryRecord], list[str]]:
    """The suite's open incidents that may enter a prompt, newest first, and the ids of those that
    may not: given a :class:`Suite`, an incident that remembers a held-out case (written before
    the split, or under another one) is left out, so no held-out case reaches a prompt."""
    name = suite.name if isinstance(suite, Suite) else suite
    found = incidents(adapter, name)
    if not isinstance(suite, Suite):
        return found[:limit], []
    held = suite.held_out_ids()
    kept = [r for r in found if not remembered(r) & held]
    return kept[:limit], [r.id for r in found if remembered(r) & held]


def failure_patterns(adapter: MemoryAdapter, suite: str | Suite, query: str | None = None,
                     limit: int = PATTERN_LIMIT) -> list[MemoryRecord]:
    """The suite's open failure memories that may enter a prompt (none showing a held-out case),
    newest first — or, given ``query``, only those the memory store finds for it (full text and
    meaning), best match first."""
    if not query:
        return lesson_records(adapter, suite, limit)[0]
    allowed = {r.id: r for r in lesson_records(adapter, suite, MAX_LESSONS)[0]}
    if not allowed:
        return []
    name = suite.name if isinstance(suite, Suite) else suite
    hits = adapter.find(query, limit=len(allowed), tags=[KIND, f"suite:{name}", "status:open"])
    ranked = [allowed[i] for i in dict.fromkeys(h.record.id for h in hits) if i in allowed]
    return ranked[:limit]


def skipped_notice(ids: Sequence[str]) -> str:
    return (f"{len(ids)} open failure memor{'y' if len(ids) == 1 else 'ies'} not injected ({', '.join(ids[:3])}): "
            "they remember held-out cases (written before the held-out split, or under another one); "
            "the next run with learning on writes them again from learn cases")


def render(records: Sequence[MemoryRecord | FoundMemory], *, budget: int, per_memory: int,
           detail: feedback.Detail = "full") -> str | None:
    """The prompt section of these failure memories (in the order given): each one's lesson
    (:func:`~evalloop.learning.incident_records.lesson_text`), fenced and capped
    (:func:`evalloop.learning.feedback.injection`); None when there is nothing to inject."""
    return feedback.injection([lesson_text(stored(r), detail) for r in records], budget=budget,
                              per_memory=per_memory)


def enhance_prompt(base: str, patterns: Sequence[MemoryRecord | FoundMemory], *, budget: int = 6000,
                   per_memory: int = 2400, detail: feedback.Detail = "full") -> str:
    """``base`` with the fenced, capped failure patterns (unchanged when there are none)."""
    section = render(patterns, budget=budget, per_memory=per_memory, detail=detail)
    return base if not section else f"{base.rstrip()}\n\n{section}\n"


class Injected(BaseModel):
    """What the next run's prompts get: the fenced text, and which memories it came from."""

    text: str | None = None
    memory_ids: list[str] = []
    records: list[MemoryRecord] = []
    #: the same memories as a target's ``lesson_records`` parameter receives them
    lesson_records: list[LessonRecord] = []
    skipped: list[str] = []  # open incidents left out: they show held-out cases (see skipped_notice)


def injected_for(settings: Settings, suite: str | Suite) -> tuple[Injected, str | None]:
    """The suite's injection under the settings' budget, and a notice if memories could not be read."""
    try:
        adapter = open_adapter(settings)
    except (EvalloopError, OSError) as exc:
        return Injected(), f"failure memories not read: {exc}"
    try:
        found, skipped = lesson_records(adapter, suite, limit=settings.inject_limit)
    except Exception as exc:  # noqa: BLE001 - prompts still work without past failures
        message = exc.one_line() if isinstance(exc, EvalloopError) else str(exc)
        return Injected(), f"failure memories not read: {message}"
    finally:
        close_adapter(adapter)
    text = render(found, budget=settings.inject_budget, per_memory=settings.inject_per_memory,
                  detail=settings.inject_detail)
    if settings.inject_detail == "ids":  # a target reading memories directly gets no more than the text
        found = [r.model_copy(update={"metadata": {k: v for k, v in r.metadata.items() if k != "corrections"}})
                 for r in found]
    kept = found if text else []
    return Injected(text=text, memory_ids=[r.id for r in kept], records=kept,
                    lesson_records=[lesson_record(r) for r in kept], skipped=skipped), None


def patterns_text(settings: Settings, suite: str | Suite, limit: int = PATTERN_LIMIT) -> tuple[str | None, str | None]:
    """The fenced failure-pattern text for a suite's prompts, and a notice if memories could not be read."""
    injected, notice = injected_for(settings.model_copy(update={"inject_limit": limit}), suite)
    return injected.text, notice


def has_memories(settings: Settings) -> bool:
    """Whether there is a memory store to read: a memory service, or the embedded file once the
    first regression wrote it (reading never creates one)."""
    return bool(settings.memory_url) or settings.memory_file.exists()
