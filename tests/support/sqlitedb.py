"""A test's raw look into a SQLite file: ``with sqlite_conn(path) as conn:`` commits what the block
wrote (rolls it back on an error) and always closes the connection.

A sqlite3 connection used as its own context manager only commits: it stays open until the garbage
collector finds it, holding the file (a lock, a WAL that is not checkpointed, a ResourceWarning
that a strict run turns into an error). Every test that opens a SQLite file by hand opens it here.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


@contextmanager
def sqlite_conn(path: str | Path, **kwargs: Any) -> Iterator[sqlite3.Connection]:
    """A connection to ``path`` (``kwargs`` as :func:`sqlite3.connect` takes them, e.g. ``uri=True``)
    for the block: committed when it ends, rolled back when it raises, closed either way."""
    conn = sqlite3.connect(path, **kwargs)
    try:
        with conn:  # the transaction: commit, or roll back on an exception
            yield conn
    finally:
        conn.close()
