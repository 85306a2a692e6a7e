"""Opening the memory store's SQLite file, with the sqlite-vec extension when it is asked for.

The default vector path is NumPy (``vectors.NumpyIndex``): exact up to 20,000 vectors, then a
sign-bit prefilter with exact rescoring of 2,000 candidates. Measured side by side
(``bench/memory_bench.py``) it finds faster than sqlite-vec's binary-quantised KNN with
rescoring, and closer to exact (recall@10 1.000 against ≈ 0.95 at 100,000 memories).
``EVALLOOP_SQLITE_VEC=on`` selects sqlite-vec (it keeps the
matrix out of process memory). Many Python builds (pyenv, macOS system Python) ship a
``sqlite3`` without ``enable_load_extension``; we then try ``sqlean`` (sqlean-py, a dependency)
and ``pysqlite3`` if importable. If none can load sqlite-vec, the store falls back to the
NumPy path and says so once.
"""

from __future__ import annotations

import functools
import importlib
import logging
import sqlite3
from pathlib import Path
from typing import Any

log = logging.getLogger("evalloop.memory")

ENV_SWITCH = "EVALLOOP_SQLITE_VEC"
_ON_VALUES = {"on", "1", "true", "yes", "sqlite-vec"}
_DRIVERS = ("sqlite3", "sqlean", "pysqlite3.dbapi2")
_noticed = False
WAL_SIZE_LIMIT = 64 * 1024 * 1024


def sqlite_vec_disabled() -> bool:
    """Whether the NumPy path is used: unless ``EVALLOOP_SQLITE_VEC=on`` asks for sqlite-vec."""
    from evalloop.environ import environment

    return (environment().sqlite_vec or "").strip().lower() not in _ON_VALUES


def _open(module: Any, path: str, readonly: bool = False) -> Any:
    if readonly:
        return _open_readonly(module, path)
    conn = module.connect(path, check_same_thread=False, isolation_level=None)
    conn.execute("PRAGMA foreign_keys = ON")
    if path != ":memory:":
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        # a bulk store_many defers checkpoints and grows the WAL; cut it back when it restarts
        conn.execute(f"PRAGMA journal_size_limit = {WAL_SIZE_LIMIT}")
    return conn


def _open_readonly(module: Any, path: str) -> Any:
    """A connection that only reads an existing file (a history this user may not write):
    ``mode=ro``, or ``immutable=1`` when even the WAL index cannot be made; no pragmas."""
    from pathlib import Path

    uri = Path(path).resolve().as_uri()
    try:
        conn = module.connect(f"{uri}?mode=ro", uri=True, check_same_thread=False, isolation_level=None)
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return conn
    except module.OperationalError:
        return module.connect(f"{uri}?immutable=1", uri=True, check_same_thread=False, isolation_level=None)


def _loads_vec(module: Any) -> bool:
    """Whether ``module``'s SQLite can load sqlite-vec (probed on ``:memory:``, never on the
    user's file: two SQLite libraries touching one file in one process break its locks)."""
    try:
        import sqlite_vec
    except ImportError:
        return False
    conn = module.connect(":memory:")
    try:
        conn.enable_load_extension(True)
        sqlite_vec.load(conn)
        conn.execute("SELECT vec_version()").fetchone()
    except Exception:  # no enable_load_extension, or the extension failed to load
        return False
    finally:
        conn.close()
    return True


@functools.cache
def vec_driver() -> Any | None:
    """The first driver module that can load sqlite-vec, or None; decided once per process."""
    for name in _DRIVERS:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if _loads_vec(module):
            return module
    return None


def _has_fts5(module: Any) -> bool:
    conn = module.connect(":memory:")
    try:
        conn.execute("CREATE VIRTUAL TABLE fts5_probe USING fts5(x)")
    except Exception:
        return False
    finally:
        conn.close()
    return True


def _plain_connection(path: str, readonly: bool = False) -> Any:
    """A connection without sqlite-vec, preferring the stdlib driver if it has FTS5."""
    if _has_fts5(sqlite3):
        return _open(sqlite3, path, readonly)
    import sqlean  # sqlean always ships FTS5

    return _open(sqlean, path, readonly)


def connect_sqlite(path: str | Path, readonly: bool = False) -> tuple[Any, bool]:
    """Open ``path`` with the best driver available; return the connection and whether
    sqlite-vec is loaded. Connections are in autocommit mode (``isolation_level=None``);
    ``readonly`` ones only read an existing file and change nothing in it or beside it.

    Unless ``EVALLOOP_SQLITE_VEC=on``, the stdlib driver is used (NumPy vector search), as
    on a Python that cannot load extensions; do not keep such a connection open on a file another
    driver has open.
    """
    global _noticed
    target = str(path)
    if sqlite_vec_disabled():
        log.debug("NumPy vector search (%s=on selects sqlite-vec)", ENV_SWITCH)
        return _plain_connection(target, readonly), False
    module = vec_driver()
    if module is not None:
        import sqlite_vec

        conn = _open(module, target, readonly)
        conn.enable_load_extension(True)
        sqlite_vec.load(conn)
        conn.enable_load_extension(False)
        return conn, True
    if not _noticed:
        _noticed = True
        log.warning(
            "evalloop: no SQLite driver here can load sqlite-vec; "
            "using NumPy vector search instead"
        )
    return _plain_connection(target, readonly), False
