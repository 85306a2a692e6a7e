"""Promoting a lesson into the prompt: the suite's injected incidents become ``promoted``.

When a lesson is folded into the system's own prompt (by hand, or by ``evalloop prompt revise
--write``), injecting it as well would hide whether the prompt now holds the product.
:func:`promote_lessons` marks the suite's open and held incidents ``promoted`` under the suite's
learning lock: they are no longer injected, and the next full run without them either resolves
them (the product is back) or opens them again, injected (it regressed): the table of
:mod:`evalloop.learning.incident_machine`.
"""

from __future__ import annotations

from evalloop.config import Settings
from evalloop.memory.records import MemoryRecord


def promote_lessons(settings: Settings, suite: str, scorer: str | None = None,
                    reason: str = "folded into the prompt") -> list[MemoryRecord]:
    """Promote the suite's injected incidents (of ``scorer``, or all); the records promoted, as
    they were before (none when nothing was ever learned)."""
    from evalloop.history.store import HistoryStore
    from evalloop.learning import incidents, injection

    if not settings.memory_url and not settings.memory_file.exists():
        return []
    store = HistoryStore(settings.database_url)
    adapter = injection.open_adapter(settings)
    try:
        with incidents.step_lock(store.engine, suite):
            found = incidents.incidents(adapter, suite, scorer)
            done = set(incidents.promote_incidents(adapter, suite, scorer, reason))
    finally:
        injection.close_adapter(adapter)
    return [r for r in found if r.id in done]
