"""What a damaged SQLite file still yields: the rows ``doctor --repair`` carries into a new one.

A file that fails its integrity check usually has most pages intact. Before a damaged history
database or memory store is replaced, the rows that nothing else can restore — schedules, their
fire records and calibrations (the run logs rebuild only runs); every memory — are read here, a
whole table at once, or row by row around damaged pages, and counted for the plan the user
agrees to. Rows that cannot be read stay in the moved file and are counted as lost.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pydantic import BaseModel, Field

from evalloop.history.details import JSONValue

#: history tables the run logs rebuild (so they are not carried over)
REBUILT = frozenset({"runs", "scorer_summaries", "case_results", "case_scores", "score_vectors"})
#: history tables that only hold who is working now: a new file starts without them
TRANSIENT = frozenset({"evalloop_locks", "evalloop_fire_claims"})
#: the schema's own bookkeeping (its version, Alembic's revision): a new file writes its own
SCHEMA = frozenset({"evalloop_schema", "alembic_version"})
#: how the plan names what a table holds
WHAT = {"evalloop_jobs": "schedule", "evalloop_schedule_runs": "schedule fire record",
        "calibrations": "calibration"}


class Rows(BaseModel):
    """The readable rows of one table of a damaged file, and how many could not be read."""

    table: str
    create: list[str] = Field(default_factory=list)  # the table's CREATE statements (table, indexes)
    columns: list[str] = Field(default_factory=list)
    rows: list[tuple[object, ...]] = Field(default_factory=list)
    lost: int = 0  # rows that could not be read (-1: the table itself could not be read)

    def said(self) -> str:
        noun = WHAT.get(self.table, f"{self.table} row")
        text = f"{len(self.rows)} {noun}{'' if len(self.rows) == 1 else 's'}"
        if self.lost:
            text += f" ({'the rest' if self.lost < 0 else self.lost} cannot be read: only in the moved file)"
        return text


@contextmanager
def read_only(path: Path) -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    try:
        yield conn
    finally:
        conn.close()


def readable_rows(conn: sqlite3.Connection, table: str) -> Rows:
    """Every row of ``table`` that can be read: the whole table, else row by row by rowid."""
    found = Rows(table=table)
    try:
        found.create = [r[0] for r in conn.execute(
            "SELECT sql FROM sqlite_master WHERE tbl_name = ? AND sql IS NOT NULL ORDER BY type DESC", (table,))]
        found.columns = [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')]
    except sqlite3.DatabaseError:
        found.lost = -1
        return found
    names = ", ".join(f'"{c}"' for c in found.columns)
    try:
        found.rows = conn.execute(f'SELECT {names} FROM "{table}"').fetchall()
        return found
    except sqlite3.DatabaseError:
        pass
    try:
        ids = [r[0] for r in conn.execute(f'SELECT rowid FROM "{table}"')]
    except sqlite3.DatabaseError:
        found.lost = -1
        return found
    for rowid in ids:
        try:
            found.rows.extend(conn.execute(f'SELECT {names} FROM "{table}" WHERE rowid = ?', (rowid,)).fetchall())
        except sqlite3.DatabaseError:
            found.lost += 1
    return found


def history_keepers(path: Path) -> list[Rows]:
    """The rows of a damaged history database that a rebuild from the run logs cannot restore."""
    try:
        with read_only(path) as conn:
            tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            return [readable_rows(conn, t) for t in tables
                    if t not in REBUILT | TRANSIENT | SCHEMA and not t.startswith("sqlite_")]
    except sqlite3.DatabaseError:  # not even the schema can be read
        return [Rows(table="evalloop_jobs", lost=-1)]


def carry_over(keepers: list[Rows], target: Path) -> dict[str, int]:
    """Write the kept rows into the rebuilt database ``target`` (tables made as they were);
    how many rows each table holds then (for the repair's verification)."""
    conn = sqlite3.connect(target, timeout=30)
    held: dict[str, int] = {}
    try:
        with conn:
            for kept in keepers:
                if not kept.rows:
                    continue
                have = [r[1] for r in conn.execute(f'PRAGMA table_info("{kept.table}")')]
                if not have:
                    for statement in kept.create:
                        conn.execute(statement)
                    have = kept.columns
                both = [i for i, c in enumerate(kept.columns) if c in have]
                names = ", ".join(f'"{kept.columns[i]}"' for i in both)
                marks = ", ".join("?" * len(both))
                conn.executemany(f'INSERT OR IGNORE INTO "{kept.table}" ({names}) VALUES ({marks})',
                                 [tuple(row[i] for i in both) for row in kept.rows])
                held[kept.table] = conn.execute(f'SELECT count(*) FROM "{kept.table}"').fetchone()[0]
    finally:
        conn.close()
    return held


class Memory(BaseModel):
    """One memory read from a damaged memory store."""

    id: str
    information: str
    metadata: dict[str, JSONValue] = Field(default_factory=dict)
    created_at: str
    tags: list[str] = Field(default_factory=list)


def readable_memories(path: Path) -> tuple[list[Memory], dict[str, str], int]:
    """The memories of a damaged store that can be read, its embedder record, and how many are lost."""
    try:
        with read_only(path) as conn:
            memories = readable_rows(conn, "memories")
            try:
                meta = dict(conn.execute("SELECT key, value FROM memory_meta").fetchall())
            except sqlite3.DatabaseError:
                meta = {}
            out = []
            for row in memories.rows:
                item = dict(zip(memories.columns, row, strict=True))
                try:
                    tags = [r[0] for r in conn.execute(
                        "SELECT tag FROM memory_tags WHERE memory_pk = ? ORDER BY position", (item["pk"],))]
                except sqlite3.DatabaseError:
                    tags = []
                raw = item.get("metadata")
                try:
                    metadata = json.loads(raw) if isinstance(raw, str) and raw else {}
                except ValueError:
                    metadata = {}
                out.append(Memory(id=item["id"], information=item["information"], created_at=item["created_at"],
                                  metadata=metadata if isinstance(metadata, dict) else {}, tags=tags))
            return out, meta, memories.lost
    except sqlite3.DatabaseError:
        return [], {}, -1


def restore_memories(path: Path, memories: list[Memory], meta: dict[str, str]) -> int:
    """Write ``memories`` into a new store at ``path`` with the old embedder, ids and times."""
    from evalloop.memory.embedders import HashingEmbedder
    from evalloop.memory.store import MemoryStore

    name, dim = meta.get("embedder_name", ""), meta.get("embedder_dim")
    embedder = HashingEmbedder(int(dim)) if name.startswith("hashing:") and dim else None
    with MemoryStore(path, embedder) as store:
        ids = store.store_many([{"information": m.information, "tags": m.tags, "metadata": m.metadata}
                                for m in memories])
    conn = sqlite3.connect(path, timeout=30)
    try:
        with conn:
            conn.executemany("UPDATE memories SET id = ?, created_at = ? WHERE id = ?",
                             [(m.id, m.created_at, new) for m, new in zip(memories, ids, strict=True) if m.id != new])
    finally:
        conn.close()
    return len(set(ids))
