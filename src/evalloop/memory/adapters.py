"""Memory adapters: the protocol the learning step writes failure memories through, and an
HTTP adapter for an external memory service (mem0-style REST by default)."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

import httpx
from pydantic import BaseModel, Field

from evalloop.errors import ConfigError, ConnectionFailed
from evalloop.memory.records import (
    FoundMemory,
    MemoryRecord,
    MetadataInput,
    TagsInput,
    normalise_tags,
    validate_information,
    validate_metadata,
)


@runtime_checkable
class MemoryAdapter(Protocol):
    """Where failure memories go: ``MemoryStore`` (embedded) or ``HTTPMemoryAdapter``."""

    def store(self, information: str, tags: TagsInput = (), metadata: MetadataInput = None) -> str: ...

    def find(self, query: str, limit: int = 5, tags: TagsInput = None) -> list[FoundMemory]: ...

    def list(self, tags: TagsInput = None, limit: int = 100) -> list[MemoryRecord]: ...

    def update(self, id: str, information: str, tags: TagsInput = (), metadata: MetadataInput = None) -> str: ...


RESERVED = ("user_id", "agent_id", "run_id", "actor_id", "role", "data", "hash", "created_at", "updated_at",
            "id", "text_lemmatized", "attributed_to", "expiration_date")


class HTTPMemoryConfig(BaseModel):
    """Where and how to reach a memory service. Defaults follow mem0's REST server (2.x):
    ``POST /memories`` (``messages``, identity, ``metadata``, ``infer``) adds, ``POST /search``
    (``query``, ``top_k``, ``threshold``, ``filters`` holding the identity) searches,
    ``GET /memories`` lists, ``PUT /memories/{id}`` (``text``, ``metadata``) updates.
    Tags travel inside metadata (``metadata.tags``) and are checked here exactly (all of them).
    Auth: put the service's header in ``headers`` (e.g. ``{"Authorization": "Token …"}`` or
    ``{"X-API-Key": …}``); they are sent on every request and redacted from messages."""

    base_url: str
    store_path: str = "/memories"
    search_path: str = "/search"
    list_path: str = "/memories"
    update_path: str = "/memories/{id}"
    timeout: float = 10.0
    headers: dict[str, str] = Field(default_factory=dict)
    user_id: str | None = "evalloop"
    agent_id: str | None = None
    infer: bool = False
    threshold: float | None = Field(default=None, ge=0.0, le=1.0,
                                    description="search score cut-off (None: the service's default)")
    fetch: int = Field(default=100, ge=1, description="hits fetched per tag-filtered search or list")


def _first_id(body: Any) -> str | None:
    if isinstance(body, Mapping):
        for key in ("id", "memory_id"):
            if isinstance(body.get(key), str | int):
                return str(body[key])
        for key in ("results", "memories", "data"):
            if key in body:
                return _first_id(body[key])
    if isinstance(body, list) and body:
        return _first_id(body[0])
    return None


def _hits(body: Any) -> list[Mapping[str, Any]]:
    if isinstance(body, Mapping):
        for key in ("results", "memories", "data"):
            if isinstance(body.get(key), list):
                return body[key]
        return []
    return body if isinstance(body, list) else []


def _record(item: Mapping[str, Any]) -> MemoryRecord:
    metadata = dict(item.get("metadata") or {})
    tags = item.get("tags") or metadata.get("tags") or []
    text = next((item[k] for k in ("memory", "information", "content", "text") if k in item), "")
    created = item.get("created_at")
    try:
        created_at = datetime.fromisoformat(created) if isinstance(created, str) else None
    except ValueError:
        created_at = None
    return MemoryRecord(
        id=str(item.get("id", "")),
        information=str(text),
        tags=normalise_tags(tags),
        metadata=metadata,
        created_at=created_at,
    )


class HTTPMemoryAdapter:
    """Stores and finds memories in an external service over HTTP (see ``HTTPMemoryConfig``)."""

    def __init__(self, base_url: str | HTTPMemoryConfig | None = None, **options: Any) -> None:
        if isinstance(base_url, HTTPMemoryConfig):
            self.config = base_url
        else:
            self.config = HTTPMemoryConfig(base_url=base_url or "", **options)
        if not self.config.base_url.startswith(("http://", "https://")):
            raise ConfigError(
                f"memory service URL {self.config.base_url!r} is not an http(s) URL",
                where="memory adapter",
                hint="set a base URL such as http://localhost:8000",
            )
        self._client = httpx.Client(
            base_url=self.config.base_url.rstrip("/"),
            timeout=self.config.timeout,
            headers=self.config.headers,
        )

    def _identity(self) -> dict[str, str]:
        ids = {"user_id": self.config.user_id, "agent_id": self.config.agent_id}
        return {k: v for k, v in ids.items() if v}

    def _post(self, path: str, payload: dict[str, Any]) -> Any:
        return self._call("POST", path, json=payload)

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        url = f"{self.config.base_url.rstrip('/')}{path}"
        try:
            response = self._client.request(method, path, **kwargs)
        except httpx.TimeoutException as exc:
            raise ConnectionFailed(
                f"memory service did not answer within {self.config.timeout:g} s",
                where=url,
                hint="check the service, or raise the adapter timeout",
            ) from exc
        except httpx.HTTPError as exc:
            raise ConnectionFailed(
                f"cannot reach the memory service ({type(exc).__name__})",
                where=url,
                hint="start the service or fix the memory adapter base URL",
            ) from exc
        if response.status_code >= 400:
            raise ConnectionFailed(
                f"memory service answered HTTP {response.status_code}: {response.text[:200]}",
                where=url,
                hint="check the adapter paths and the service logs",
            )
        try:
            return response.json()
        except ValueError as exc:
            raise ConnectionFailed("memory service answered with something that is not JSON", where=url) from exc

    @staticmethod
    def _outgoing(metadata: Mapping[str, Any], tags: list[str]) -> dict[str, Any]:
        """Metadata as the service keeps it: mem0's identity and payload keys renamed ``eval_<key>``
        (it would drop or overwrite them), tags inside."""
        meta = {(f"eval_{k}" if k in RESERVED else k): v for k, v in metadata.items()}
        return {**meta, "tags": tags}

    def store(self, information: str, tags: TagsInput = (), metadata: MetadataInput = None) -> str:
        """Add a memory; returns the id the service gave it."""
        text = validate_information(information)
        payload = {
            "messages": [{"role": "user", "content": text}],
            "metadata": self._outgoing(validate_metadata(metadata), normalise_tags(tags)),
            "infer": self.config.infer,
            **self._identity(),
        }
        body = self._post(self.config.store_path, payload)
        memory_id = _first_id(body)
        if memory_id is None:
            raise ConnectionFailed(
                "memory service stored nothing (no id in its answer)",
                where=f"{self.config.base_url}{self.config.store_path}",
                hint="with mem0, keep infer=False so the text is stored as given",
            )
        stored = [h.get("memory") for h in _hits(body) if isinstance(h, Mapping)]
        if not self.config.infer and (len(stored) != 1 or (stored[0] is not None and stored[0] != text)):
            warnings.warn(f"memory service rewrote the memory although infer=false was sent "
                          f"({len(stored)} memories back): it may ignore infer", stacklevel=2)
        return memory_id

    def _filters(self, where: Mapping[str, Any] | None = None, tags: list[str] | None = None) -> dict[str, Any]:
        filters: dict[str, Any] = {**self._identity(), **(where or {})}
        if tags:  # mem0 reads a list as "any of": narrowed server-side, checked exactly here
            filters["tags"] = tags
        return filters

    def find(self, query: str, limit: int = 5, tags: TagsInput = None,
             where: Mapping[str, Any] | None = None, threshold: float | None = None) -> list[FoundMemory]:
        """Search the service; only hits carrying all ``tags`` (and ``where``'s metadata) are kept.
        With tags or ``where`` it fetches ``fetch`` hits so that the exact check still finds ``limit``."""
        wanted = normalise_tags(tags)
        filtered = bool(wanted or where)
        payload: dict[str, Any] = {"query": query, "top_k": max(limit, self.config.fetch) if filtered else limit,
                                   "filters": self._filters(where, wanted)}
        cut = threshold if threshold is not None else (0.0 if filtered else self.config.threshold)
        if cut is not None:
            payload["threshold"] = cut
        body = self._post(self.config.search_path, payload)
        found: list[FoundMemory] = []
        for rank, item in enumerate(_hits(body), start=1):
            if not isinstance(item, Mapping):
                continue
            record = _record(item)
            if not _matches(record, wanted, where):
                continue
            score = item.get("score")
            value = float(score) if isinstance(score, int | float) else 1.0 / rank
            found.append(FoundMemory(record=record, score=value, vector_rank=rank))
        return found[:limit]

    def list(self, tags: TagsInput = None, limit: int = 100,
             where: Mapping[str, Any] | None = None) -> list[MemoryRecord]:
        """Memories in scope, newest (last updated) first (``GET /memories``), carrying all ``tags``."""
        wanted = normalise_tags(tags)
        params = {**self._identity(), "top_k": max(limit, self.config.fetch) if wanted or where else limit}
        body = self._call("GET", self.config.list_path, params=params)
        items = [item for item in _hits(body) if isinstance(item, Mapping)]
        items.sort(key=lambda i: str(i.get("updated_at") or i.get("created_at") or ""), reverse=True)
        records = [r for r in map(_record, items) if _matches(r, wanted, where)]
        return records[:limit]

    def update(self, id: str, information: str, tags: TagsInput = (), metadata: MetadataInput = None) -> str:
        """Replace a memory's text and metadata (``PUT /memories/{id}``); returns its id."""
        payload = {"text": validate_information(information),
                   "metadata": self._outgoing(validate_metadata(metadata), normalise_tags(tags))}
        self._call("PUT", self.config.update_path.format(id=id), json=payload)
        return id

    def delete_all(self) -> None:
        """Delete every memory of this adapter's scope (``DELETE /memories?user_id=…``)."""
        self._call("DELETE", self.config.list_path, params=self._identity())

    def close(self) -> None:
        self._client.close()


def _matches(record: MemoryRecord, tags: list[str], where: Mapping[str, Any] | None) -> bool:
    return set(tags) <= set(record.tags) and all(record.metadata.get(k) == v for k, v in (where or {}).items())
