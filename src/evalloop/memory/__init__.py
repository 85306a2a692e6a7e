"""The embedded semantic memory store, embedders, and adapters for other memory systems."""

from evalloop.memory.adapters import HTTPMemoryAdapter, HTTPMemoryConfig, MemoryAdapter
from evalloop.memory.embedders import (
    Embedder,
    HashingEmbedder,
    SentenceTransformerEmbedder,
    StaticEmbedder,
    default_embedder,
    resolve_embedder,
)
from evalloop.memory.embedders_http import HTTPEmbedder
from evalloop.memory.records import FoundMemory, InvalidMemory, MemoryRecord
from evalloop.memory.sqlite_ext import connect_sqlite
from evalloop.memory.store import DEFAULT_PATH, MemoryInput, MemoryStore

__all__ = [
    "DEFAULT_PATH",
    "Embedder",
    "FoundMemory",
    "HTTPEmbedder",
    "HTTPMemoryAdapter",
    "HTTPMemoryConfig",
    "HashingEmbedder",
    "InvalidMemory",
    "MemoryAdapter",
    "MemoryInput",
    "MemoryRecord",
    "MemoryStore",
    "SentenceTransformerEmbedder",
    "StaticEmbedder",
    "connect_sqlite",
    "default_embedder",
    "resolve_embedder",
]
