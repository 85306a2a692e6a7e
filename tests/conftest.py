"""Shared fixtures: a throwaway PostgreSQL server, and history URLs on SQLite and PostgreSQL; the
environment every test starts from."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.postgres import PostgresServer, pg_bin, start_server

# The commands the tests run see what a pipe gives them, however pytest was started: a shell (or
# pytest-xdist's workers) may export COLUMNS and LINES, which the CLI's output would then wrap at
# (tests that want a width pass COLUMNS themselves).
for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PostgresServer]:
    """One PostgreSQL server for the session. Skipped only outside CI when not installed."""
    if pg_bin() is None and os.environ.get("CI", "").lower() not in ("true", "1"):
        pytest.skip("PostgreSQL is not installed (apt-get install postgresql); CI runs these tests")
    server = start_server()  # under CI a missing server fails here, loudly
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def history_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, empty history database: an SQLite file, or a new PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'shared' / 'evalloop.db'}"
    return request.getfixturevalue("pg_server").create_database()


@pytest.fixture
def answers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The file ``sut:controlled`` answers from (``support.project.write_answers`` fills it)."""
    path = tmp_path / "answers.json"
    monkeypatch.setenv("EVALLOOP_TEST_ANSWERS", str(path))
    return path
