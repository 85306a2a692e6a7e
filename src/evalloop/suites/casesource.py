"""Where a suite's cases come from, read and validated: a JSONL file beside the suite (streamed,
each line checked), an inline list (validated in one call), or a folder served by a case source
registered by name (``dataset:``, through the ``evalloop.case_sources`` entry points). A bad case
is a :class:`FixtureError` naming the file, the line or case id, and what is wrong."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from evalloop.errors import FixtureError
from evalloop.suites.case import Case
from evalloop.suites.jsonlines import open_jsonl, parse_line
from evalloop.validation import first_error

CaseSource = Callable[[Path], Iterator[Case]]
_CASE_SOURCES: dict[str, CaseSource] = {}


def register_case_source(name: str, source: CaseSource) -> None:
    """Make ``source(folder) -> cases`` serve suites whose cases come from a ``name`` folder.

    Packages register theirs through the ``evalloop.case_sources`` entry-point group (the
    benchmark datasets of :mod:`evalloop.retrieval` serve ``dataset:`` that way), so the core
    never imports them.
    """
    _CASE_SOURCES[name] = source


def case_source(name: str) -> CaseSource:
    """The case source registered under ``name`` (entry points are loaded on first use)."""
    if name not in _CASE_SOURCES:
        from importlib.metadata import entry_points

        for ep in entry_points(group="evalloop.case_sources"):
            if ep.name == name:
                register_case_source(name, ep.load())
    if name not in _CASE_SOURCES:
        raise FixtureError(f"no case source '{name}' is installed",
                           hint="reinstall evalloop (pip install .) so its entry points are registered")
    return _CASE_SOURCES[name]


def jsonl_cases(path: Path) -> Iterator[tuple[int, Case]]:
    """(line number, case) of every non-blank line of a JSONL cases file, in file order; a
    FixtureError naming the line for the first bad one.

    pydantic-core parses and validates each line in one call (``validate_json``). A line it
    refuses takes the slow path — ``json.loads``, then the model — which either accepts it as
    Python's JSON does (``NaN``, a lone surrogate) or says what is wrong, with the column."""
    validate = Case.__pydantic_validator__.validate_json
    with open_jsonl(path) as handle:
        for lineno, raw in enumerate(handle, start=1):
            try:
                case = validate(raw)
            except ValidationError:
                if not raw.strip():
                    continue
                case = read_case(parse_line(raw, path, lineno), f"{path}:{lineno}")
            yield lineno, case


_CASE_LIST = TypeAdapter(list[Case])


def read_case(data: Any, where: str) -> Case:
    """One case from parsed JSON, or a FixtureError at ``where`` (with the case id when it has one)
    saying what is wrong."""
    if not isinstance(data, dict):
        raise FixtureError("a case must be an object with id and input", where=where)
    try:
        return Case.model_validate(data)
    except ValidationError as exc:
        case_id = data.get("id")
        raise FixtureError(first_error(exc, Case), where=f"{where} (case '{case_id}')" if case_id
                           else where, hint="a case has id, input, expected, tags, metadata, expect, output") from None


def valid_cases(items: list[Any]) -> list[Case] | None:
    """The cases validated in one call (a 10k-case suite: a few times faster than one by one);
    None when one is not a mapping or does not validate."""
    if not all(isinstance(item, dict) for item in items):
        return None
    try:
        return _CASE_LIST.validate_python(items)
    except ValidationError:
        return None

