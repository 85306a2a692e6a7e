"""The memory file's schema and the write path's plain pieces: checked memories, ids, content
hashes and the batches ``store_many`` writes."""

from __future__ import annotations

import hashlib
import os
from typing import NamedTuple

SCHEMA_VERSION = "1"
#: Memories per write transaction in ``store_many`` (larger batches write fewer FTS segments).
BATCH_SIZE = 8192
FIRST_BATCH = 1024

SCHEMA = """
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
-- The store adds each batch's tag counts in one statement (an upsert per tag row was a
-- third of the tag insert cost); files from older versions lose the per-row trigger here.
DROP TRIGGER IF EXISTS memory_tags_count_insert;
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
-- The store writes memory_fts itself, one executemany per batch: a per-row insert trigger
-- cost a third of the insert time. Files from older versions lose that trigger here.
DROP TRIGGER IF EXISTS memories_fts_insert;
CREATE TRIGGER IF NOT EXISTS memories_fts_delete AFTER DELETE ON memories BEGIN
    INSERT INTO memory_fts(memory_fts, rowid, information)
    VALUES ('delete', old.pk, old.information);
END;
"""


class CleanMemory(NamedTuple):
    """A checked memory on its way in: text, tags, metadata as JSON text."""

    information: str
    tags: list[str]
    metadata: str


def new_ids(n: int) -> list[str]:
    """``n`` fresh random 128-bit ids as 32 hex digits (one ``os.urandom`` call)."""
    blob = os.urandom(16 * n).hex()
    return [blob[i : i + 32] for i in range(0, 32 * n, 32)]


def batches(items: list[tuple[str, CleanMemory]], size: int) -> list[dict[str, CleanMemory]]:
    """``items`` cut into batches of ``size``, the first ones smaller (1024, 2048, ...) so the
    pipeline starts writing soon."""
    out: list[dict[str, CleanMemory]] = []
    start, step = 0, min(FIRST_BATCH, size)
    while start < len(items):
        out.append(dict(items[start : start + step]))
        start, step = start + step, min(2 * step, size)
    return out


def content_hash(information: str) -> str:
    """Identity of a memory's content: exact duplicates share it."""
    return hashlib.sha256(information.encode("utf-8")).hexdigest()
