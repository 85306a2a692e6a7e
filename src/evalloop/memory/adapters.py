"""Memory adapters: the protocol the learning step writes failure memories through, and an
HTTP adapter for an external memory service (mem0-style REST by default)."""

from __future__ import annotations

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


class HTTPMemoryConfig(BaseModel):
    """Where and how to reach a memory service. Defaults follow mem0's REST server:
    ``POST /memories`` with ``messages`` to add, ``POST /search`` with ``query`` to search.
    Tags travel inside metadata (``metadata.tags``) and are also filtered here, exactly."""

    base_url: str
    store_path: str = "/memories"
    search_path: str = "/search"
    timeout: float = 10.0
    headers: dict[str, str] = Field(default_factory=dict)
    user_id: str | None = "evalloop"
    agent_id: str | None = None
    infer: bool = False


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
        url = f"{self.config.base_url.rstrip('/')}{path}"
        try:
            response = self._client.post(path, json=payload)
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

    def store(self, information: str, tags: TagsInput = (), metadata: MetadataInput = None) -> str:
        """Add a memory; returns the id the service gave it."""
        text = validate_information(information)
        clean_tags = normalise_tags(tags)
        meta = {**validate_metadata(metadata), "tags": clean_tags}
        payload = {
            "messages": [{"role": "user", "content": text}],
            "metadata": meta,
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
        return memory_id

    def find(self, query: str, limit: int = 5, tags: TagsInput = None) -> list[FoundMemory]:
        """Search the service; only hits carrying all ``tags`` are kept."""
        wanted = normalise_tags(tags)
        payload: dict[str, Any] = {"query": query, "limit": limit, **self._identity()}
        if wanted:
            payload["filters"] = {"tags": wanted}
        body = self._post(self.config.search_path, payload)
        found: list[FoundMemory] = []
        for rank, item in enumerate(_hits(body), start=1):
            if not isinstance(item, Mapping):
                continue
            record = _record(item)
            if not set(wanted) <= set(record.tags):
                continue
            score = item.get("score")
            found.append(
                FoundMemory(
                    record=record,
                    score=float(score) if isinstance(score, int | float) else 1.0 / rank,
                    vector_rank=rank,
                )
            )
        return found[:limit]

    def close(self) -> None:
        self._client.close()
