"""Safe SQLite FTS5 MATCH strings built from arbitrary text, and FTS5 index sizes."""

from __future__ import annotations

import re
import sqlite3

_WORD = re.compile(r"\w+", re.UNICODE)
_ASCII_WORD = re.compile(r"[A-Za-z0-9_]+")


def tokens(text: str, *, ascii_only: bool = False) -> list[str]:
    """Word tokens of ``text`` (Unicode ``\\w+`` runs, or ASCII ``[A-Za-z0-9_]+`` runs)."""
    return (_ASCII_WORD if ascii_only else _WORD).findall(text)


def quote(token: str) -> str:
    """One FTS5 string literal: double quotes, with embedded quotes doubled."""
    return '"' + token.replace('"', '""') + '"'


def match_query(text: str, operator: str = "OR", *, ascii_only: bool = False) -> str | None:
    """``"w1" OP "w2" …`` for the tokens of ``text``, or ``None`` when it has no tokens.

    Every token is quoted, so FTS5 syntax in user text (``AND``, ``NEAR``, ``*``, ``:``, ``-``,
    parentheses, quotes) is matched literally and can never break the query.
    """
    if operator not in ("OR", "AND"):
        raise ValueError("operator must be 'OR' or 'AND'")
    toks = tokens(text, ascii_only=ascii_only)
    if not toks:
        return None
    return f" {operator} ".join(quote(t) for t in dict.fromkeys(toks))


def database_bytes(conn: sqlite3.Connection) -> int:
    """Bytes used by the (possibly in-memory) database: page_count × page_size."""
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    size = conn.execute("PRAGMA page_size").fetchone()[0]
    return int(pages) * int(size)
