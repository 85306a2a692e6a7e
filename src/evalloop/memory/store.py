"""The embedded memory store: one SQLite file with FTS5 text search and vector search, fused
by reciprocal rank fusion, with exact tag filters and JSON metadata."""

from __future__ import annotations

import builtins
import contextlib
import json
import threading
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, Field, JsonValue

from evalloop.errors import MEMORY_RECOVER, ConfigError, is_db_error, store_error
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
from evalloop.memory.schema import (
    BATCH_SIZE,
    SCHEMA,
    SCHEMA_VERSION,
    CleanMemory,
    batches,
    content_hash,
    new_ids,
)
from evalloop.memory.search import Fusion, HybridSearcher, tagged_sql
from evalloop.memory.sqlite_ext import connect_sqlite
from evalloop.memory.textsearch import TOKENIZE, TextSearcher
from evalloop.memory.vectors import Backend, NumpyIndex, SqliteVecIndex, VectorIndex

DEFAULT_PATH = Path("history") / "memory.db"
class MemoryInput(BaseModel):
    """One memory to store, as ``store_many`` takes it."""

    information: str
    tags: list[str] = Field(default_factory=list)
    metadata: dict[str, JsonValue] = Field(default_factory=dict)


def _marks(n: int) -> str:
    return ",".join("?" * n)


class MemoryStore:
    """The embedded semantic memory store (also a ``MemoryAdapter``).

    ``path`` defaults to ``history/memory.db``; ``embedder`` defaults to the shipped static model.
    The embedder's name and dimension are recorded in the file, and reopening with another one is
    a ``ConfigError``. Safe to share between threads (one lock around the connection).
    """

    def __init__(self, path: str | Path = DEFAULT_PATH, embedder: Embedder | None = None,
                 fusion: Fusion | None = None, *, readonly: bool = False, **weights: Any) -> None:
        self.path = Path(path)
        self.fusion = fusion or Fusion(**weights)
        self.readonly = readonly  # only reads an existing file (`memories list/find` on a read-only history)
        if str(path) != ":memory:" and not readonly:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        try:
            self._conn, vec_loaded = connect_sqlite(path, readonly=readonly)
            if not readonly:
                self._conn.executescript(SCHEMA.replace("{tokenize}", TOKENIZE))
        except Exception as exc:  # damaged, locked, or not ours to open: one line naming the file
            if not is_db_error(exc):
                raise
            raise store_error(exc, store="memory store", where=str(path), recover=MEMORY_RECOVER) from None
        self._text = TextSearcher(self._conn)
        self._embedder, self.embedder_name, self.dim = self._check_embedder(embedder)
        self.fusion = self.fusion.for_embedder(self.embedder_name)
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
        if stored_name is None and not self.readonly:
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
        """``numpy`` (the default: exact up to 20,000 vectors, prefiltered above) or ``sqlite-vec``
        (``EVALLOOP_SQLITE_VEC=on``)."""
        return self._index.backend

    # -- writing -------------------------------------------------------------------------

    def store(self, information: str, tags: TagsInput = (), metadata: MetadataInput = None) -> str:
        """Store one memory and return its id; identical content returns the existing id and
        changes nothing. ``tags`` may be a list or a comma-separated string; ``metadata`` a
        mapping or a JSON object string."""
        item = {"information": information, "tags": tags, "metadata": metadata}
        return self.store_many([item])[0]

    def store_many(self, items: Iterable[str | MemoryInput | Mapping[str, Any]],
                   batch_size: int = BATCH_SIZE) -> list[str]:
        """Store many memories in batched transactions; ids in input order (duplicates map to
        the id already stored). The next batch is embedded on a worker thread while the
        current one is written (the tokenizer and SQLite both release the GIL)."""
        clean = [self._validate(item) for item in items]
        hashes = [content_hash(m.information) for m in clean]
        with self._lock:
            known = self._existing(hashes)
            fresh: dict[str, CleanMemory] = {}
            for h, m in zip(hashes, clean, strict=True):
                if h not in known and h not in fresh:
                    fresh[h] = m
            pending = batches(list(fresh.items()), batch_size)
            with self._bulk(len(pending) > 1):
                for batch, vectors in self._embedded(pending):
                    self._insert(batch, vectors, known)
        return [known[h] for h in hashes]

    def _embed(self, texts: list[str]) -> np.ndarray:
        return np.ascontiguousarray(self.embedder.embed(texts), dtype=np.float32)

    def _embedded(self, work: list[dict[str, CleanMemory]]) -> Iterator[tuple[dict[str, CleanMemory], np.ndarray]]:
        """Each batch with its vectors; batch i + 1 is embedded while the caller writes batch i."""
        if len(work) <= 1:
            for batch in work:
                yield batch, self._embed([m.information for m in batch.values()])
            return
        with ThreadPoolExecutor(1, thread_name_prefix="evalloop-embed") as pool:
            future = pool.submit(self._embed, [m.information for m in work[0].values()])
            for i, batch in enumerate(work):
                vectors = future.result()
                if i + 1 < len(work):
                    future = pool.submit(self._embed, [m.information for m in work[i + 1].values()])
                yield batch, vectors

    @contextlib.contextmanager
    def _bulk(self, on: bool) -> Iterator[None]:
        """While on, no automatic WAL checkpoints: each one copies the pages every batch
        rewrites (FTS segments, index leaves) and syncs the file; one checkpoint at the end
        copies each page once."""
        if not on or str(self.path) == ":memory:":
            yield
            return
        (saved,) = self._conn.execute("PRAGMA wal_autocheckpoint").fetchone()
        self._conn.execute("PRAGMA wal_autocheckpoint = 0")
        try:
            yield
        finally:
            self._conn.execute(f"PRAGMA wal_autocheckpoint = {int(saved)}")
            self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()  # never waits

    def _validate(self, item: str | MemoryInput | Mapping[str, Any]) -> CleanMemory:
        if isinstance(item, str):
            return CleanMemory(validate_information(item), [], "{}")
        if isinstance(item, MemoryInput):
            item = item.model_dump()
        metadata = validate_metadata(item.get("metadata"))
        return CleanMemory(
            validate_information(item.get("information")),
            normalise_tags(item.get("tags")),
            json.dumps(metadata, allow_nan=False) if metadata else "{}",
        )

    def _existing(self, hashes: Sequence[str]) -> dict[str, str]:
        found: dict[str, str] = {}
        for start in range(0, len(hashes), 900):
            chunk = list(hashes[start : start + 900])
            marks = _marks(len(chunk))
            sql = f"SELECT content_hash, id FROM memories WHERE content_hash IN ({marks})"
            found.update(self._conn.execute(sql, chunk).fetchall())
        return found

    def _insert(self, fresh: dict[str, CleanMemory], vectors: np.ndarray, known: dict,
                replace: tuple[int, str, str] | None = None) -> None:
        """Insert ``fresh`` in one transaction; ``replace`` (pk, id, created_at) swaps one memory
        for the single fresh item, keeping its id and creation time (it becomes the newest).
        Primary keys are assigned here (max + 1 on, as SQLite would) so every table is
        written with one ``executemany``."""
        now = datetime.now(UTC).isoformat()
        conn = self._conn
        try:
            conn.execute("BEGIN IMMEDIATE")
            if replace is not None:
                self._index.remove([replace[0]])
                conn.execute("DELETE FROM memories WHERE pk = ?", (replace[0],))
                mids, created = [replace[1]], replace[2]
            else:
                mids, created = new_ids(len(fresh)), now
            (top,) = conn.execute("SELECT coalesce(max(pk), 0) FROM memories").fetchone()
            pks = range(top + 1, top + 1 + len(fresh))
            items = list(fresh.items())
            conn.executemany(
                "INSERT INTO memories(pk, id, information, content_hash, metadata, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [(pk, mid, m.information, h, m.metadata, created)
                 for pk, mid, (h, m) in zip(pks, mids, items, strict=True)],
            )
            conn.executemany(
                "INSERT INTO memory_fts(rowid, information) VALUES (?, ?)",
                [(pk, m.information) for pk, (_, m) in zip(pks, items, strict=True)],
            )
            tag_rows = [(tag, pk, i) for pk, (_, m) in zip(pks, items, strict=True) for i, tag in enumerate(m.tags)]
            conn.executemany("INSERT INTO memory_tags(tag, memory_pk, position) VALUES (?, ?, ?)", tag_rows)
            conn.executemany(
                "INSERT INTO memory_tag_counts(tag, n) VALUES (?, ?) ON CONFLICT(tag) DO UPDATE SET n = n + excluded.n",
                Counter(tag for tag, _, _ in tag_rows).items(),
            )
            conn.executemany(
                "INSERT INTO memory_vectors(rowid, embedding) VALUES (?, ?)",
                [(pk, v.tobytes()) for pk, v in zip(pks, vectors, strict=True)],
            )
            self._index.add(list(pks), vectors)
            conn.execute("COMMIT")
            if replace is not None:
                self._text.removed()
            self._text.invalidate(pks.start)
        except BaseException:
            conn.execute("ROLLBACK")
            self._index = self._make_index()
            raise
        for (h, _), mid in zip(items, mids, strict=True):
            known[h] = mid

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
            vectors = self._embed([item.information])
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
                self._text.removed()
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

    def find(self, query: str, limit: int = 5, tags: TagsInput = None) -> builtins.list[FoundMemory]:
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


class MemoryReader(MemoryStore):
    """The embedded store opened read-only (SQLite ``mode=ro``) for ``get``, ``list`` and
    ``count``: nothing is created, migrated or written, not even the embedder's name (``evalloop
    view`` reads incidents this way). Search and writes need a :class:`MemoryStore`."""

    def __init__(self, path: str | Path = DEFAULT_PATH) -> None:  # noqa: D107 - the class says it
        import sqlite3

        self.path = Path(path)
        self._lock = threading.RLock()
        try:
            self._conn = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True,
                                         check_same_thread=False, isolation_level=None)
            self._conn.execute("SELECT count(*) FROM memories").fetchone()
        except Exception as exc:  # missing, damaged or not a memory store: one line naming the file
            if not is_db_error(exc):
                raise
            raise store_error(exc, store="memory store", where=str(path), recover=MEMORY_RECOVER) from None

    def find(self, query: str, limit: int = 5, tags: TagsInput = None) -> builtins.list[FoundMemory]:
        raise ConfigError("a memory store opened read-only cannot search", where=str(self.path),
                          hint="open it with MemoryStore to search")
