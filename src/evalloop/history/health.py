"""Store health: is each store evalloop keeps readable, and how to recover one that is not.

:func:`check_all` looks at the history database (SQLite ``integrity_check``, or a query on a
server), every run log (each line parsed, a partial last line found), the embedded memory store
and the LLM response cache. Each :class:`Check` says what it found and, when something is
wrong, how to recover. ``evalloop doctor`` prints them.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from evalloop.access import AccessProblem, diagnose, user_name
from evalloop.config import Settings
from evalloop.errors import CACHE_RECOVER, EvalloopError, db_message, is_damage, is_db_error, store_error
from evalloop.redact import redact_url

#: ``cannot open``/``read-only``: this process may not open (or write) a store that is not
#: damaged — ownership, mode, a read-only mount, a lock; ``damaged``: the file is corrupt.
State = Literal["ok", "missing", "damaged", "cannot open", "read-only", "unreachable", "failing", "skipped"]


class Check(BaseModel):
    """One store: what it is, where, its state, details, and how to recover it."""

    store: str
    where: str
    state: State
    detail: str = ""
    recover: str = ""

    @property
    def ok(self) -> bool:
        return self.state in ("ok", "missing", "skipped")

    def line(self) -> str:
        text = f"{self.store:<17} {self.where}: {self.state}"
        if self.detail:
            text += f" ({self.detail})"
        if self.recover:
            text += f" — {self.recover}"
        return text


def access_check(store: str, problem: AccessProblem) -> Check:
    """A store this process may not open (or only read): never damaged, never to be moved."""
    return Check(store=store, where=str(problem.path), state="read-only" if problem.readable else "cannot open",
                 detail=problem.what, recover=problem.fix + " (the file is not damaged: nothing to repair)")


def sqlite_check(store: str, path: Path, recover: str) -> Check | None:
    """None when the SQLite file ``path`` opens here and passes ``integrity_check``; else why not.

    *cannot open* / *read-only* (ownership, mode, a read-only mount, a lock held) is told from
    *damaged* (the file is not a database, or its integrity check fails): only a damaged file
    is ever moved aside by ``--repair``.
    """
    problem = diagnose(path)
    if problem is not None:
        return access_check(store, problem)
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
        try:
            rows = [r[0] for r in conn.execute("PRAGMA integrity_check(20)").fetchall()]
        finally:
            conn.close()
    except sqlite3.Error as exc:
        message = str(exc)
        if is_damage(message):
            return Check(store=store, where=str(path), state="damaged", detail=message, recover=recover)
        locked = "locked" in message.lower()
        return Check(store=store, where=str(path), state="cannot open", detail=message,
                     recover="wait for the other evalloop process (or stop it) and check again" if locked
                     else "check the file, its -wal/-shm files and its folder (the file is not damaged: "
                          "nothing to repair)")
    if rows == ["ok"]:
        return None
    return Check(store=store, where=str(path), state="damaged", recover=recover,
                 detail=f"{len(rows)}{'+' if len(rows) >= 20 else ''} problem(s), first: {rows[0]}")


def check_history(settings: Settings) -> Check:
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    from evalloop.history.engine import available_driver, recovery_hint, store_where

    url = settings.database_url
    where = store_where(url)
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        path = Path(parsed.database)
        if not path.exists():
            return Check(store="history database", where=where, state="missing", detail="made by the first run")
        found = sqlite_check("history database", path, recovery_hint(url))
        if found is not None:
            return found
    try:
        engine = create_engine(available_driver(parsed))
        try:
            with engine.connect() as conn:
                runs = conn.execute(text("SELECT count(*) FROM runs")).scalar_one()
        finally:
            engine.dispose()
    except Exception as exc:  # noqa: BLE001 - reported, whatever it is
        if not is_db_error(exc) and not isinstance(exc, ModuleNotFoundError):
            raise
        message = db_message(exc)
        if "runs" in message and ("no such table" in message or "does not exist" in message):
            return Check(store="history database", where=where, state="missing", detail="no runs table yet")
        problem = store_error(exc, store="history database", where=where) if is_db_error(exc) else None
        unreachable = problem is None or problem.what.startswith("cannot reach")
        return Check(store="history database", where=where, state="unreachable" if unreachable else "failing",
                     detail=redact_message(message),
                     recover="check history_url, the server and the network" if unreachable
                     else (problem.hint if problem and problem.hint else "run `evalloop doctor`"))
    return Check(store="history database", where=where, state="ok", detail=f"{runs} runs")


def redact_message(message: str) -> str:
    from evalloop.redact import redact_text

    return redact_text(message)


def check_run_logs(settings: Settings) -> list[Check]:
    from evalloop.history import runlog

    out = []
    for suite in runlog.log_suites(settings.history_dir):
        path = runlog.log_path(settings.history_dir, suite)
        try:
            partial = _partial_tail(path)
            n = sum(1 for _ in runlog.read_log(path))
        except PermissionError as exc:
            owner = user_name(path.stat().st_uid)
            out.append(Check(store="run log", where=str(path), state="cannot open", detail=str(exc.strerror),
                             recover=f"run evalloop as {owner}, or `chmod a+r {path}` as its owner "
                                     "(the file is not damaged: nothing to repair)"))
            continue
        except EvalloopError as exc:
            out.append(Check(store="run log", where=exc.where or str(path), state="damaged", detail=exc.what,
                             recover=exc.hint or ""))
            continue
        except (OSError, UnicodeDecodeError) as exc:
            out.append(Check(store="run log", where=str(path), state="damaged", detail=str(exc),
                             recover="restore the file from git (`git checkout -- FILE`)"))
            continue
        if partial:
            out.append(Check(store="run log", where=str(path), state="damaged",
                             detail=f"partial last line ({partial} bytes, left by an interrupted write; "
                                    f"{n} good runs)",
                             recover="the next run (or `evalloop doctor --repair`) cuts it off"))
        else:
            out.append(Check(store="run log", where=str(path), state="ok", detail=f"{n} runs"))
    return out


def _partial_tail(path: Path) -> int:
    """The length of an unterminated last line that is not a complete entry, else 0."""
    from evalloop.history.runlog import _is_entry

    size = path.stat().st_size
    if not size:
        return 0
    with open(path, "rb") as f:
        f.seek(max(0, size - 1_000_000))
        tail = f.read()
    if tail.endswith(b"\n"):
        return 0
    last = tail.rpartition(b"\n")[2]
    return 0 if _is_entry(last) else len(last)


def check_sqlite_file(store: str, path: Path, recover: str) -> Check:
    if not path.exists():
        return Check(store=store, where=str(path), state="missing", detail="made when first needed")
    return sqlite_check(store, path, recover) or Check(store=store, where=str(path), state="ok",
                                                       detail=f"{os.path.getsize(path)} bytes")


def check_all(settings: Settings) -> list[Check]:
    """Every store of a project, in the order a run uses them."""
    checks = [check_history(settings), *check_run_logs(settings)]
    if settings.memory_url:
        checks.append(Check(store="memory store", where=redact_url(settings.memory_url), state="skipped",
                            detail="a memory service; evalloop does not check it"))
    else:
        memory = settings.memory_file
        checks.append(check_sqlite_file(
            "memory store", memory,
            "`evalloop doctor --repair` moves it aside: a new store is made on the next regression"))
    cache = settings.cache_file
    checks.append(check_sqlite_file("LLM cache", cache, "`evalloop doctor --repair` moves it aside (it is "
                                    "only a cache); " + CACHE_RECOVER.split(":")[0] + " until then"))
    return checks
