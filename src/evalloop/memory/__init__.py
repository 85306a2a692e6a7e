"""The embedded semantic memory store, embedders, and adapters for other memory systems.

Names load on first use: a run whose scorer only embeds imports the embedders, not the store,
its SQLite extensions or the HTTP adapters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from evalloop.lazy import lazy_exports

_EXPORTS = {
    "HTTPMemoryAdapter": "evalloop.memory.adapters", "HTTPMemoryConfig": "evalloop.memory.adapters",
    "MemoryAdapter": "evalloop.memory.adapters",
    "Embedder": "evalloop.memory.embedders", "HashingEmbedder": "evalloop.memory.embedders",
    "SentenceTransformerEmbedder": "evalloop.memory.embedders", "StaticEmbedder": "evalloop.memory.embedders",
    "default_embedder": "evalloop.memory.embedders", "resolve_embedder": "evalloop.memory.embedders",
    "HTTPEmbedder": "evalloop.memory.embedders_http",
    "FoundMemory": "evalloop.memory.records", "InvalidMemory": "evalloop.memory.records",
    "MemoryRecord": "evalloop.memory.records",
    "connect_sqlite": "evalloop.memory.sqlite_ext",
    "DEFAULT_PATH": "evalloop.memory.store", "MemoryInput": "evalloop.memory.store",
    "MemoryStore": "evalloop.memory.store",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())

if TYPE_CHECKING:  # for type checkers and IDEs
    from evalloop.memory.adapters import HTTPMemoryAdapter, HTTPMemoryConfig, MemoryAdapter  # noqa: F401
    from evalloop.memory.embedders import (  # noqa: F401
        Embedder,
        HashingEmbedder,
        SentenceTransformerEmbedder,
        StaticEmbedder,
        default_embedder,
        resolve_embedder,
    )
    from evalloop.memory.embedders_http import HTTPEmbedder  # noqa: F401
    from evalloop.memory.records import FoundMemory, InvalidMemory, MemoryRecord  # noqa: F401
    from evalloop.memory.sqlite_ext import connect_sqlite  # noqa: F401
    from evalloop.memory.store import DEFAULT_PATH, MemoryInput, MemoryStore  # noqa: F401
