"""The embedded memory store: one SQLite file with FTS5 text search and vector search, fused
by reciprocal rank fusion, with exact tag filters and JSON metadata."""

from __future__ import annotations

import hashlib
import json
import threading
import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, Field, JsonValue

from evalloop.errors import ConfigError
from evalloop.memory.embedders import (
    DEFAULT_EMBEDDER_NAME,
    Embedder,
    HashingEmbedder,
    default_embedder,
    default_embedder_dim,
)
from evalloop.memory.records import (
    FoundMemory,
    MemoryRecord,
    MetadataInput,
    TagsInput,
    normalise_tags,
    validate_information,
    validate_metadata,
)
from evalloop.memory.search import Fusion, HybridSearcher, tagged_sql
from evalloop.memory.sqlite_ext import connect_sqlite
from evalloop.memory.textsearch import TOKENIZE, TextSearcher
from evalloop.memory.vectors import Backend, NumpyIndex, SqliteVecIndex, VectorIndex

DEFAULT_PATH = Path("history") / "memory.db"
SCHEMA_VERSION = "1"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS memory_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS memories (
    pk INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    information TEXT NOT NULL,
    content_hash TEXT NOT NULL UNIQUE,
    metadata TEXT NOT NULL DEFAULT '{}',
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS memory_tags (
    tag TEXT NOT NULL,
    memory_pk INTEGER NOT NULL REFERENCES memories(pk) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    PRIMARY KEY (tag, memory_pk)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS memory_tags_by_memory ON memory_tags(memory_pk);
CREATE TABLE IF NOT EXISTS memory_tag_counts (tag TEXT PRIMARY KEY, n INTEGER NOT NULL)
    WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS memory_tags_count_insert AFTER INSERT ON memory_tags BEGIN
    INSERT INTO memory_tag_counts(tag, n) VALUES (new.tag, 1)
    ON CONFLICT(tag) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER IF NOT EXISTS memory_tags_count_delete AFTER DELETE ON memory_tags BEGIN
    UPDATE memory_tag_counts SET n = n - 1 WHERE tag = old.tag;
END;
CREATE TABLE IF NOT EXISTS memory_vectors (
    rowid INTEGER PRIMARY KEY REFERENCES memories(pk) ON DELETE CASCADE,
    embedding BLOB NOT NULL
);
CREATE VIRTUAL TABLE IF NOT EXISTS memory_fts USING fts5(
    information, content='memories', content_rowid='pk',
    tokenize='{tokenize}'
);
CREATE TRIGGER IF NOT EXISTS memories_fts_insert AFTER INSERT ON memories BEGIN
    INSERT INTO memory_fts(rowid, information) VALUES (new.pk, new.information);
END;
CREATE TRIGGER IF NOT EXISTS memories_fts_delete AFTER DELETE ON memories BEGIN
    INSERT INTO memory_fts(memory_fts, rowid, information)
    VALUES ('delete', old.pk, old.information);
END;
"""


class MemoryInput(BaseModel):
    """One memory to store, as ``store_many`` takes it."""

    information: str
    tags: list[str] = Field(default_factory=list)
    metadata: dict[str, JsonValue] = Field(default_factory=dict)


def content_hash(information: str) -> str:
    """Identity of a memory's content: exact duplicates share it."""
    return hashlib.sha256(information.encode("utf-8")).hexdigest()


def _marks(n: int) -> str:
    return ",".join("?" * n)


class MemoryStore:
    """The embedded semantic memory store (also a ``MemoryAdapter``).

    ``path`` defaults to ``history/memory.db``; ``embedder`` defaults to the shipped static model.
    The embedder's name and dimension are recorded in the file, and reopening with another one is
    a ``ConfigError``. Safe to share between threads (one lock around the connection).
    """

    def __init__(self, path: str | Path = DEFAULT_PATH, embedder: Embedder | None = None,
                 fusion: Fusion | None = None, **weights: Any) -> None:
        self.path = Path(path)
        self.fusion = fusion or Fusion(**weights)
        if str(path) != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._conn, vec_loaded = connect_sqlite(path)
        self._conn.executescript(_SCHEMA.replace("{tokenize}", TOKENIZE))
        self._text = TextSearcher(self._conn)
        self._embedder, self.embedder_name, self.dim = self._check_embedder(embedder)
        self._vec_loaded = vec_loaded
        self._index = self._make_index()

    # -- setup ---------------------------------------------------------------------------

    def _meta(self) -> dict[str, str]:
        return dict(self._conn.execute("SELECT key, value FROM memory_meta").fetchall())

    def _check_embedder(self, embedder: Embedder | None) -> tuple[Embedder | None, str, int]:
        """The embedder (None: the default, loaded on first use), its name and dimension,
        checked against what the file records (and recorded if it records nothing)."""
        meta = self._meta()
        stored_name, stored_dim = meta.get("embedder_name"), meta.get("embedder_dim")
        if embedder is None:
            if stored_name is None or stored_name == DEFAULT_EMBEDDER_NAME:
                name, dim = DEFAULT_EMBEDDER_NAME, default_embedder_dim()
            elif stored_name.startswith("hashing:") and stored_dim is not None:
                embedder = HashingEmbedder(int(stored_dim))
            else:
                raise ConfigError(
                    f"memory store was built with embedder {stored_name!r}",
                    where=str(self.path),
                    hint="open it with that embedder (pass embedder=...)",
                )
        if embedder is not None:
            name, dim = embedder.name, embedder.dim
        if stored_name is None:
            self._conn.executemany(
                "INSERT OR REPLACE INTO memory_meta(key, value) VALUES (?, ?)",
                [("schema_version", SCHEMA_VERSION), ("embedder_name", name), ("embedder_dim", str(dim))],
            )
        elif stored_name != name or stored_dim != str(dim):
            raise ConfigError(
                f"memory store was built with embedder {stored_name!r} ({stored_dim} dims), not {name!r} ({dim} dims)",
                where=str(self.path),
                hint="open it with the same embedder, or use a new memory file",
            )
        return embedder, name, dim

    @property
    def embedder(self) -> Embedder:
        """The embedder in use (the shipped default is loaded on first use)."""
        if self._embedder is None:
            self._embedder = default_embedder()
        return self._embedder

    def _make_index(self) -> VectorIndex:
        if self._vec_loaded:
            return SqliteVecIndex(self._conn, self.dim)
        return NumpyIndex(self._conn, self.dim)

    @property
    def vector_backend(self) -> Backend:
        """``numpy`` (exact search, the default) or ``sqlite-vec`` (``EVALLOOP_SQLITE_VEC=on``)."""
        return self._index.backend

    # -- writing -------------------------------------------------------------------------

    def store(self, information: str, tags: TagsInput = (), metadata: MetadataInput = None) -> str:
        """Store one memory and return its id; identical content returns the existing id and
        changes nothing. ``tags`` may be a list or a comma-separated string; ``metadata`` a
        mapping or a JSON object string."""
        item = {"information": information, "tags": tags, "metadata": metadata}
        return self.store_many([item])[0]

    def store_many(self, items: Iterable[str | MemoryInput | Mapping[str, Any]], batch_size: int = 2048) -> list[str]:
        """Store many memories in batched transactions; ids in input order (duplicates map to
        the id already stored)."""
        clean = [self._validate(item) for item in items]
        ids: list[str] = []
        with self._lock:
            for start in range(0, len(clean), batch_size):
                ids.extend(self._store_batch(clean[start : start + batch_size]))
        return ids

    def _validate(self, item: str | MemoryInput | Mapping[str, Any]) -> MemoryInput:
        if isinstance(item, MemoryInput):
            item = item.model_dump()
        if isinstance(item, str):
            item = {"information": item}
        return MemoryInput.model_construct(
            information=validate_information(item.get("information")),
            tags=normalise_tags(item.get("tags")),
            metadata=validate_metadata(item.get("metadata")),
        )

    def _existing(self, hashes: Sequence[str]) -> dict[str, str]:
        found: dict[str, str] = {}
        for start in range(0, len(hashes), 900):
            chunk = list(hashes[start : start + 900])
            marks = _marks(len(chunk))
            sql = f"SELECT content_hash, id FROM memories WHERE content_hash IN ({marks})"
            found.update(self._conn.execute(sql, chunk).fetchall())
        return found

    def _store_batch(self, batch: list[MemoryInput]) -> list[str]:
        hashes = [content_hash(m.information) for m in batch]
        known = self._existing(hashes)
        fresh: dict[str, MemoryInput] = {}
        for h, m in zip(hashes, batch, strict=True):
            if h not in known and h not in fresh:
                fresh[h] = m
        if fresh:
            vectors = self.embedder.embed([m.information for m in fresh.values()])
            vectors = np.ascontiguousarray(vectors, dtype=np.float32)
            self._insert(fresh, vectors, known)
        return [known[h] for h in hashes]

    def _insert(self, fresh: dict[str, MemoryInput], vectors: np.ndarray, known: dict,
                replace: tuple[int, str, str] | None = None) -> None:
        """Insert ``fresh`` in one transaction; ``replace`` (pk, id, created_at) swaps one memory
        for the single fresh item, keeping its id and creation time (it becomes the newest)."""
        now = datetime.now(UTC).isoformat()
        conn = self._conn
        pks: list[int] = []
        try:
            conn.execute("BEGIN IMMEDIATE")
            if replace is not None:
                self._index.remove([replace[0]])
                conn.execute("DELETE FROM memories WHERE pk = ?", (replace[0],))
            for h, m in fresh.items():
                mid = replace[1] if replace else uuid.uuid4().hex
                cur = conn.execute(
                    "INSERT INTO memories(id, information, content_hash, metadata, created_at) VALUES (?, ?, ?, ?, ?)",
                    (mid, m.information, h, json.dumps(m.metadata, allow_nan=False), replace[2] if replace else now),
                )
                pk = int(cur.lastrowid)
                pks.append(pk)
                known[h] = mid
                conn.executemany(
                    "INSERT INTO memory_tags(tag, memory_pk, position) VALUES (?, ?, ?)",
                    [(tag, pk, i) for i, tag in enumerate(m.tags)],
                )
            conn.executemany(
                "INSERT INTO memory_vectors(rowid, embedding) VALUES (?, ?)",
                [(pk, v.tobytes()) for pk, v in zip(pks, vectors, strict=True)],
            )
            self._index.add(pks, vectors)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            self._index = self._make_index()
            raise

    def update(self, id: str, information: str, tags: TagsInput = (), metadata: MetadataInput = None) -> str:
        """Replace a memory's text, tags and metadata, keeping its id and creation time; it moves
        to the front of ``list`` (newest first). Text equal to another memory's is an error."""
        item = self._validate({"information": information, "tags": tags, "metadata": metadata})
        h = content_hash(item.information)
        with self._lock:
            row = self._conn.execute("SELECT pk, created_at FROM memories WHERE id = ?", (id,)).fetchone()
            if row is None:
                raise ConfigError(f"no memory with id {id!r}", where=str(self.path),
                                  hint="list ids with `evalloop memories list`")
            other = self._existing([h]).get(h)
            if other is not None and other != id:
                raise ConfigError(f"memory {other} already holds this text", where=str(self.path),
                                  hint="update that memory instead")
            vectors = np.ascontiguousarray(self.embedder.embed([item.information]), dtype=np.float32)
            self._insert({h: item}, vectors, {}, replace=(row[0], id, row[1]))
        return id

    def delete(self, id: str) -> bool:
        """Delete a memory by id; False if there was none."""
        with self._lock:
            row = self._conn.execute("SELECT pk FROM memories WHERE id = ?", (id,)).fetchone()
            if row is None:
                return False
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                self._index.remove([row[0]])
                self._conn.execute("DELETE FROM memories WHERE pk = ?", (row[0],))
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                self._index = self._make_index()
                raise
            return True

    # -- reading -------------------------------------------------------------------------

    def _records(self, pks: Sequence[int]) -> dict[int, MemoryRecord]:
        if not pks:
            return {}
        marks = _marks(len(pks))
        tags: dict[int, list[str]] = {pk: [] for pk in pks}
        for pk, tag in self._conn.execute(
            f"SELECT memory_pk, tag FROM memory_tags WHERE memory_pk IN ({marks}) ORDER BY memory_pk, position",
            list(pks),
        ):
            tags[pk].append(tag)
        out: dict[int, MemoryRecord] = {}
        for pk, mid, info, meta, created in self._conn.execute(
            f"SELECT pk, id, information, metadata, created_at FROM memories WHERE pk IN ({marks})",
            list(pks),
        ):
            out[pk] = MemoryRecord(
                id=mid,
                information=info,
                tags=tags[pk],
                metadata=json.loads(meta),
                created_at=datetime.fromisoformat(created),
            )
        return out

    def get(self, id: str) -> MemoryRecord | None:
        """The memory with this id, or None."""
        with self._lock:
            row = self._conn.execute("SELECT pk FROM memories WHERE id = ?", (id,)).fetchone()
            return None if row is None else self._records([row[0]])[row[0]]

    def list(self, tags: TagsInput = None, limit: int = 100, offset: int = 0) -> list[MemoryRecord]:
        """Memories, newest first, optionally only those carrying all ``tags``."""
        wanted = normalise_tags(tags)
        with self._lock:
            if wanted:
                sql, params = tagged_sql(wanted)
                sql = f"SELECT pk FROM memories WHERE pk IN ({sql}) ORDER BY pk DESC"
                rows = self._conn.execute(sql + " LIMIT ? OFFSET ?", [*params, limit, offset]).fetchall()
            else:
                rows = self._conn.execute(
                    "SELECT pk FROM memories ORDER BY pk DESC LIMIT ? OFFSET ?", (limit, offset)
                ).fetchall()
            pks = [r[0] for r in rows]
            records = self._records(pks)
            return [records[pk] for pk in pks]

    def count(self) -> int:
        """How many memories are stored."""
        with self._lock:
            return int(self._conn.execute("SELECT count(*) FROM memories").fetchone()[0])

    def __len__(self) -> int:
        return self.count()

    def find(self, query: str, limit: int = 5, tags: TagsInput = None) -> list[FoundMemory]:
        """Hybrid search: full-text (BM25) and vector candidates fused by weighted reciprocal rank
        fusion (:class:`Fusion`), restricted to memories carrying all ``tags`` (exact match)."""
        if limit <= 0 or not query.strip():
            return []
        wanted = normalise_tags(tags)
        qvec = np.ascontiguousarray(self.embedder.embed([query])[0], dtype=np.float32)
        with self._lock:
            searcher = HybridSearcher(self._conn, self._index, self._text, self.fusion)
            fused = searcher.search(query, qvec, limit, wanted)
            records = self._records([f.pk for f in fused])
        return [
            FoundMemory(
                record=records[f.pk],
                score=f.score,
                text_rank=f.text_rank,
                vector_rank=f.vector_rank,
                similarity=f.similarity,
            )
            for f in fused
            if f.pk in records
        ]

    # -- lifecycle -----------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
