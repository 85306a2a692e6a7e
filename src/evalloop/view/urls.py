"""The viewer's stable URLs: one function per page, used by its pages and by ``run`` (which prints
the failing run's page when a viewer is configured: the ``viewer_url`` setting)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from urllib.parse import quote, urlencode

#: the query parameters a run's page keeps in its links (filters and page number)
FILTERS = ("failing", "flipped", "tag", "scorer", "held_out", "q", "page")


def home() -> str:
    return "/"


def suite(name: str) -> str:
    return f"/suites/{quote(name, safe='')}"


def run(run_id: str, **query: object) -> str:
    kept = {k: v for k, v in query.items() if v not in (None, "", False)}
    return f"/runs/{quote(run_id, safe='')}" + (f"?{urlencode(kept)}" if kept else "")


def compare(a: str, b: str, **query: object) -> str:
    kept = {k: v for k, v in query.items() if v not in (None, "", False)}
    return f"/compare/{quote(a, safe='')}/{quote(b, safe='')}" + (f"?{urlencode(kept)}" if kept else "")


def incidents() -> str:
    return "/incidents"


def incident(memory_id: str) -> str:
    return f"/incidents/{quote(memory_id, safe='')}"


def absolute(base: str, path: str) -> str:
    """A page's full URL under the viewer's base URL (``viewer_url``)."""
    return base.rstrip("/") + path


def failing_runs(reports: Iterable[Any], base: str | None, *, fail_on_regression: bool = True) -> list[str]:
    """``run``'s lines naming each failing run's page in the viewer at ``base`` (none without one)."""
    if not base:
        return []
    from evalloop.loop.exitcodes import OK, exit_code

    return [f"view {r.suite.name}: {absolute(base, run(r.executed.run.id))}" for r in reports
            if exit_code(r.comparison, fail_on_regression=fail_on_regression) != OK]
