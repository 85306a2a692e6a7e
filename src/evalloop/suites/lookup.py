"""Finding suites: where they are looked up (the project's ``fixtures/``, then the ones that
ship), a suite by name or path, and which suites ``run --all`` runs."""

from __future__ import annotations

import json
from pathlib import Path

from evalloop.errors import FixtureError, UnknownSuiteError
from evalloop.suites.load import PACKAGE_FIXTURES, SUITE_SUFFIXES, load_suite
from evalloop.suites.suite import Suite
from evalloop.suites.yamlhead import declared_name


def suite_dirs(project_dir: Path) -> list[Path]:
    """Where suites are looked up: the project's ``fixtures/``, then the ones that ship."""
    return [project_dir / "fixtures", PACKAGE_FIXTURES]


def discover_suites(project_dir: Path) -> dict[str, Path]:
    """Suite name → file. A project suite shadows a shipped suite of the same name."""
    found: dict[str, Path] = {}
    for directory in reversed(suite_dirs(project_dir)):
        if not directory.is_dir():
            continue
        here: dict[str, Path] = {}
        for path in sorted(directory.iterdir()):
            if path.suffix in SUITE_SUFFIXES and not path.name.startswith("_"):
                name = _suite_name(path)
                if name in here:
                    raise FixtureError(f"two files declare suite '{name}': {here[name].name} and {path.name}",
                                       where=str(directory), hint="give each suite its own name")
                here[name] = path
        found.update(here)
    return found


def project_suites(project_dir: Path) -> dict[str, Path]:
    """Suite name → file, for the project's own ``fixtures/`` only."""
    return {name: path for name, path in discover_suites(project_dir).items()
            if path.parent != PACKAGE_FIXTURES}


def is_evalloop_repo(project_dir: Path) -> bool:
    """Whether the project is evalloop's own repository (its pyproject names evalloop)."""
    import tomllib

    try:
        data = tomllib.loads((project_dir / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return data.get("project", {}).get("name") == "evalloop"


def suites_for_all(project_dir: Path, *, shipped: bool = False) -> list[str]:
    """What ``run --all`` runs: the project's own suites. The suites that ship with evalloop
    join them with ``shipped``, in evalloop's own repository, or when the project has none
    (a directory that is no project yet: the demo). A user's project stays the user's."""
    own = project_suites(project_dir)
    if shipped or not own or is_evalloop_repo(project_dir):
        return sorted(discover_suites(project_dir))
    return sorted(own)


def _suite_name(path: Path) -> str:
    """The declared name of a suite file, read from its beginning (a YAML file's first events,
    :func:`~evalloop.suites.yamlhead.declared_name`); the file stem when it has none."""
    if path.suffix != ".json":
        return declared_name(path) or path.stem
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(data, dict) and isinstance(data.get("name"), str):
            return data["name"]
    except (OSError, ValueError):
        pass
    return path.stem


def find_suite(name_or_path: str, project_dir: Path, *, limit: int | None = None) -> Suite:
    """Load a suite by name (project first, then shipped) or by file path. With ``limit`` (a run
    of the first N cases, no case filter) a YAML suite may be read only that far
    (:attr:`Suite.head_only`)."""
    candidate = Path(name_or_path)
    if candidate.suffix in SUITE_SUFFIXES and candidate.exists():
        return load_suite(candidate, limit)
    for directory in suite_dirs(project_dir):  # fast path: a file named after its suite
        for suffix in SUITE_SUFFIXES:
            path = directory / f"{name_or_path}{suffix}"
            if path.is_file() and _suite_name(path) == name_or_path:
                return load_suite(path, limit)
    suites = discover_suites(project_dir)
    if name_or_path not in suites:
        import difflib

        close = difflib.get_close_matches(name_or_path, suites, n=1)
        hint = (f"did you mean '{close[0]}'? " if close else "") + "see `evalloop suites list`"
        raise UnknownSuiteError(f"unknown suite '{name_or_path}'", where=str(project_dir / "fixtures"),
                           hint=hint)
    return load_suite(suites[name_or_path], limit)
