"""Retrieval data types: documents, queries, qrels and the Retriever protocol."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, field_validator

DocId = str
"""Document ids are normalised to ``str`` everywhere (the JSONL files may use ints)."""

Qrels = dict[str, dict[str, int]]
"""``query_id -> doc_id -> relevance grade``; a grade of 1 or more counts as relevant."""

Run = dict[str, list[str]]
"""``query_id -> ranked doc ids``, best first."""


class Doc(BaseModel):
    """One corpus entry; extra fields (category, tags, importance, …) are kept.

    ``scope`` (a conversation, user or session id) puts the document in one of several
    separate corpora: a query with the same scope searches only those documents.
    """

    model_config = ConfigDict(extra="allow")

    id: str | int
    content: str
    scope: str | None = None

    @property
    def key(self) -> DocId:
        """The id as the string used in qrels and runs."""
        return str(self.id)

    def field(self, name: str, default: Any = None) -> Any:
        """An extra field by name (``category``, ``tags``, …), or ``default``."""
        return (self.model_extra or {}).get(name, default)


class Query(BaseModel):
    """One evaluation query; ``relevant_ids`` is a convenience copy, qrels are authoritative."""

    model_config = ConfigDict(extra="allow")

    query_id: str
    text: str
    stratum: str = "all"
    scope: str | None = None
    relevant_ids: list[str | int] = Field(default_factory=list)

    @field_validator("query_id", mode="before")
    @classmethod
    def _id_to_str(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int) else value


@runtime_checkable
class Retriever(Protocol):
    """Anything with ``retrieve(query, k)`` returning up to ``k`` doc ids, best first.

    Optional, duck-typed hooks: ``build_index(corpus: list[Doc])`` (timed),
    ``index_size_bytes() -> int`` and a ``name`` attribute used in reports.
    """

    def retrieve(self, query: str, k: int) -> Sequence[str | int]: ...


RetrieverLike = Retriever | Callable[[str, int], Sequence[str | int]]


class CallableRetriever:
    """Wraps a bare ``retrieve(query, k)`` function as a :class:`Retriever`."""

    def __init__(self, fn: Callable[[str, int], Sequence[str | int]], name: str | None = None):
        self._fn = fn
        self.name = name or getattr(fn, "__name__", "retriever")

    def retrieve(self, query: str, k: int) -> Sequence[str | int]:
        return self._fn(query, k)


def as_retriever(obj: RetrieverLike) -> Retriever:
    """Return ``obj`` if it is a Retriever, or wrap a bare callable."""
    if hasattr(obj, "retrieve"):
        return obj
    if callable(obj):
        return CallableRetriever(obj)
    raise TypeError(f"{obj!r} is neither a Retriever nor a callable retrieve(query, k)")


def retriever_name(obj: Any, default: str = "retriever") -> str:
    """The retriever's ``name`` attribute, else its class name."""
    name = getattr(obj, "name", None)
    if isinstance(name, str) and name:
        return name
    if hasattr(obj, "retrieve") or not callable(obj):
        return type(obj).__name__
    return getattr(obj, "__name__", default)
