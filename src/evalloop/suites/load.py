"""Loading a suite file (YAML or JSON): parsed, its inline cases validated, the whole checked
before anything is run or written; every problem one :class:`FixtureError` naming the file and line.
Where the shipped suites are (``PACKAGE_FIXTURES``) and which files are suites (``SUITE_SUFFIXES``)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from pydantic import ValidationError

from evalloop.errors import FixtureError
from evalloop.suites.casesource import read_case, valid_cases
from evalloop.suites.jsonlines import not_utf8
from evalloop.suites.suite import Suite
from evalloop.suites.yamlhead import cases_head
from evalloop.suites.yamlload import load_yaml
from evalloop.validation import first_error

SUITE_SUFFIXES = (".yaml", ".yml", ".json")
PACKAGE_FIXTURES = Path(__file__).parent.parent / "fixtures"


def load_suite(path: str | Path, limit: int | None = None) -> Suite:
    """Load and validate a suite file, including all its cases (with ``limit``, a YAML file's
    first ``limit`` cases when the rest need not be read: :func:`~evalloop.suites.yamlhead.cases_head`).
    Raises FixtureError."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise FixtureError(f"cannot read suite file: {exc.strerror}", where=str(path)) from None
    except UnicodeDecodeError as exc:
        raise not_utf8(exc, path, line=exc.object[:exc.start].count(b"\n") + 1) from None
    head = cases_head(text, limit) if limit and path.suffix != ".json" else None
    if head is not None:
        text = head
    lines: list[int] = []
    try:
        if path.suffix == ".json":
            data = json.loads(text)
        else:
            data, lines = load_yaml(text, path)  # aliases refused before anything expands
    except json.JSONDecodeError as exc:
        raise FixtureError(f"invalid JSON: {exc.msg}", where=f"{path}:{exc.lineno}",
                           hint="fix the JSON syntax") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        problem = getattr(exc, "problem", None) or str(exc).split("\n")[0]
        raise FixtureError(f"invalid YAML: {problem}", where=where,
                           hint="fix the YAML syntax (indentation, quotes, colons)") from None
    if not isinstance(data, dict):
        raise FixtureError("a suite file must be a mapping with name, target, scorers, cases",
                           where=str(path))
    raw_cases = data.get("cases")
    if isinstance(raw_cases, list):
        cases = valid_cases(raw_cases)
        if cases is None:  # one by one, for the file and line of the first that is wrong
            cases = []
            for i, item in enumerate(raw_cases):
                line = lines[i] if i < len(lines) else None
                cases.append(read_case(item, f"{path}:{line}" if line else f"{path} (case #{i + 1})"))
        data = {**data, "cases": cases}
    try:
        suite = Suite.model_validate({**data, "path": path.resolve()})
    except ValidationError as exc:
        raise FixtureError(first_error(exc, Suite), where=str(path),
                           hint="see `evalloop suites validate --help` for the suite format") from None
    if isinstance(suite.cases, list):
        seen: dict[str, int] = {}
        for i, case in enumerate(suite.cases):
            if case.id in seen:
                line = lines[i] if i < len(lines) else None
                raise FixtureError(f"duplicate case id '{case.id}'",
                                   where=f"{path}:{line}" if line else str(path),
                                   hint="give every case a unique id")
            seen[case.id] = i
    if head is not None:
        suite._head_only = limit
    return suite
