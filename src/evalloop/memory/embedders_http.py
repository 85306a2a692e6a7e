"""An embedder backed by an HTTP endpoint: OpenAI-compatible ``/v1/embeddings`` or Ollama's
``/api/embed``."""

from __future__ import annotations

import os
from typing import Any, Literal

import httpx
import numpy as np

from evalloop.errors import ConfigError, ConnectionFailed
from evalloop.memory.vectors import normalise_rows

Api = Literal["openai", "ollama"]
_PATHS: dict[str, str] = {"openai": "/v1/embeddings", "ollama": "/api/embed"}


class HTTPEmbedder:
    """Embeds by POSTing batches to an embeddings server; rows are L2-normalised here.

    ``base_url`` is the server root (``http://localhost:11434`` for Ollama); a trailing ``/v1``
    is tolerated for OpenAI-style URLs. ``dim`` is probed with one request if not given.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api: Api = "openai",
        *,
        api_key: str | None = None,
        dim: int | None = None,
        timeout: float = 30.0,
        batch_size: int = 256,
    ) -> None:
        if api not in _PATHS:
            raise ConfigError(f"unknown embeddings API {api!r}", hint="use 'openai' or 'ollama'")
        root = base_url.rstrip("/")
        if api == "openai" and root.endswith("/v1"):
            root = root[: -len("/v1")]
        self.url = root + _PATHS[api]
        self.model = model
        self.api = api
        self.name = f"{api}:{model}"
        self.batch_size = batch_size
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        headers = {"Authorization": f"Bearer {key}"} if key and api == "openai" else {}
        self._client = httpx.Client(timeout=timeout, headers=headers)
        self._dim = dim

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = int(self._post(["dimension probe"]).shape[1])
        return self._dim

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts = [self._post(texts[i : i + self.batch_size]) for i in range(0, len(texts), self.batch_size)]
        out = np.vstack(parts)
        if self._dim is None:
            self._dim = out.shape[1]
        elif out.shape[1] != self._dim:
            raise ConfigError(
                f"embeddings server returned {out.shape[1]}-dim vectors, expected {self._dim}",
                where=self.url,
                hint="check the model name",
            )
        return out

    def _post(self, batch: list[str]) -> np.ndarray:
        try:
            response = self._client.post(self.url, json={"model": self.model, "input": batch})
        except httpx.HTTPError as exc:
            raise ConnectionFailed(
                f"cannot reach the embeddings server ({type(exc).__name__})",
                where=self.url,
                hint="start the server or fix the embedder base URL",
            ) from exc
        if response.status_code in (401, 403):
            raise ConfigError(
                f"embeddings server refused the request (HTTP {response.status_code})",
                where=self.url,
                hint="set OPENAI_API_KEY or pass api_key",
            )
        if response.status_code >= 400:
            raise ConnectionFailed(
                f"embeddings server answered HTTP {response.status_code}: {response.text[:200]}",
                where=self.url,
                hint="check the model name and the server logs",
            )
        return normalise_rows(self._vectors(response.json(), len(batch)))

    def _vectors(self, body: Any, expected: int) -> list[list[float]]:
        try:
            if self.api == "ollama":
                vectors = body["embeddings"]
            else:
                rows = sorted(body["data"], key=lambda item: item.get("index", 0))
                vectors = [row["embedding"] for row in rows]
        except (KeyError, TypeError) as exc:
            raise ConnectionFailed(
                "embeddings server answered without vectors in the expected shape",
                where=self.url,
                hint=f"is this an {self.api}-compatible endpoint?",
            ) from exc
        if len(vectors) != expected:
            raise ConnectionFailed(
                f"embeddings server returned {len(vectors)} vectors for {expected} texts",
                where=self.url,
            )
        return vectors

    def close(self) -> None:
        self._client.close()
