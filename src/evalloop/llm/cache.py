"""The response cache: one SQLite file (WAL) of replies keyed by a hash of the request.

A damaged cache file never stops a run: the client says so once (``CachedClient.notice``)
and goes on uncached; only a replay (``--cache-only``) stops, in one line naming the file.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import sqlite3
import threading
import time
from contextvars import ContextVar
from pathlib import Path
from typing import Literal

from evalloop.errors import CACHE_RECOVER, ReplayMiss, store_error
from evalloop.llm.types import ClosingClient, LLMClient, LLMRequest, LLMResponse
from evalloop.llm.usage import record_usage

CacheMode = Literal["use", "off", "only"]
log = logging.getLogger("evalloop.llm.cache")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    request TEXT NOT NULL,
    response TEXT NOT NULL,
    created REAL NOT NULL
)
"""


def cache_key(request: LLMRequest, epoch: int = 0, namespace: str = "") -> str:
    """SHA-256 of model, system, messages, tools, tool_choice, temperature, max_tokens, epoch,
    and the provider (``namespace``: two servers serving one model name do not share replies)."""
    payload = {
        "model": request.model,
        "system": request.system,
        "messages": [m.model_dump() for m in request.messages],
        "tools": [request.tool.model_dump()] if request.tool else [],
        "tool_choice": {"type": "tool", "name": request.tool.name} if request.tool else None,
        "temperature": request.temperature,
        "max_tokens": request.max_tokens,
        "epoch": epoch,
    }
    if namespace:
        payload["provider"] = namespace
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


class ResponseCache:
    """A thread-safe key -> :class:`LLMResponse` store in one SQLite file in WAL mode."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=30.0)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(_SCHEMA)
        self._db.commit()

    def get(self, key: str) -> LLMResponse | None:
        """The cached reply for ``key``, or ``None``."""
        with self._lock:
            row = self._db.execute("SELECT response FROM responses WHERE key = ?", (key,)).fetchone()
        return LLMResponse.model_validate_json(row[0]) if row else None

    def put(self, key: str, request: LLMRequest, response: LLMResponse) -> None:
        """Store ``response`` under ``key`` (replacing any earlier one)."""
        stored = response.model_copy(update={"cached": False, "retries": 0})
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO responses (key, model, request, response, created) VALUES (?, ?, ?, ?, ?)",
                (
                    key,
                    request.model,
                    request.model_dump_json(),
                    stored.model_dump_json(),
                    time.time(),
                ),
            )
            self._db.commit()

    def delete(self, key: str) -> None:
        """Forget the reply stored under ``key``."""
        with self._lock:
            self._db.execute("DELETE FROM responses WHERE key = ?", (key,))
            self._db.commit()

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT count(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._db.close()


current_epoch: ContextVar[int] = ContextVar("evalloop_epoch", default=0)
"""The epoch of the case being run (the runner sets it), added to the cache key."""


class CachedClient(ClosingClient):
    """An :class:`LLMClient` that serves repeated requests from a :class:`ResponseCache`.

    ``mode``: ``use`` reads and writes the cache; ``off`` neither reads nor writes
    (``--no-cache``); ``only`` replays and raises :class:`~evalloop.errors.ReplayMiss` on a miss
    (``--cache-only``). Concurrent identical requests share one call. Bump ``epoch`` to ask
    again for replies that are otherwise identical (e.g. several samples at temperature > 0).
    """

    def __init__(
        self,
        inner: LLMClient,
        path: str | Path,
        mode: CacheMode = "use",
        epoch: int = 0,
    ) -> None:
        if mode not in ("use", "off", "only"):
            raise ValueError(f"unknown cache mode {mode!r}")
        self.inner = inner
        self.name = inner.name
        self.model = inner.model
        self.mode: CacheMode = mode
        self.epoch = epoch
        self.path = Path(path)
        self.notice: str | None = None
        self.cache: ResponseCache | None = None
        try:
            self.cache = ResponseCache(path)
        except sqlite3.Error as exc:  # a damaged cache never stops a run (except a replay)
            self._broken(exc, raise_in_replay=True, log_it=False)  # build_services shows .notice
        self._inflight: dict[str, asyncio.Future[LLMResponse]] = {}

    def _broken(self, exc: BaseException, raise_in_replay: bool = False, log_it: bool = True) -> None:
        """Stop using a damaged cache file: say so once (``notice``, and a warning when it broke
        mid-run); a replay (``only``) cannot go on without it."""
        replay = self.mode == "only" and raise_in_replay
        error = store_error(exc, store="LLM cache", where=str(self.path), recover=(
            "a --cache-only run replays from this file: restore it, or run without --cache-only" if replay
            else CACHE_RECOVER))
        if self.cache is not None:
            with contextlib.suppress(sqlite3.Error):
                self.cache.close()
        self.cache = None
        if replay:
            raise error
        if self.notice is None:
            self.notice = error.one_line()
            if log_it:
                log.warning("%s", self.notice)

    def _get(self, key: str) -> LLMResponse | None:
        if self.cache is None:
            return None
        try:
            return self.cache.get(key)
        except sqlite3.Error as exc:
            self._broken(exc, raise_in_replay=True)
            return None

    def _put(self, key: str, request: LLMRequest, response: LLMResponse) -> None:
        if self.cache is None:
            return
        try:
            self.cache.put(key, request, response)
        except sqlite3.Error as exc:
            self._broken(exc)

    async def complete(self, request: LLMRequest) -> LLMResponse:
        """A cached reply if there is one (per ``mode``), else the inner client's."""
        if self.mode == "off" or (self.cache is None and self.mode == "use"):
            return await self.inner.complete(request)
        key = self._key(request)
        hit = self._get(key)
        if hit is not None:
            return self._hit(hit)
        if self.mode == "only":
            raise ReplayMiss(
                f"no cached reply for {request.model} asked {_describe(request)} (key {key[:12]})",
                where=str(self.path),
                hint="run once without --cache-only to record the replies",
            )
        while (pending := self._inflight.get(key)) is not None:
            try:
                return self._hit(await asyncio.shield(pending))
            except asyncio.CancelledError:
                if not pending.cancelled():
                    raise  # this caller was cancelled, not the shared call
        future: asyncio.Future[LLMResponse] = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            response = await self.inner.complete(request)
        except asyncio.CancelledError:
            future.cancel()  # waiters then make the call themselves
            raise
        except BaseException as error:
            future.set_exception(error)
            future.exception()  # mark retrieved: waiters re-raise it themselves
            raise
        finally:
            self._inflight.pop(key, None)
        self._put(key, request, response)
        future.set_result(response)
        return response

    def _key(self, request: LLMRequest) -> str:
        namespace = getattr(self.inner, "cache_namespace", "")
        return cache_key(request, self.epoch + current_epoch.get(), namespace)

    def forget(self, request: LLMRequest) -> None:
        """Drop a cached reply that turned out unusable (e.g. it did not parse), so the next run
        asks again instead of replaying the same failure."""
        if self.mode == "use" and self.cache is not None:
            try:
                self.cache.delete(self._key(request))
            except sqlite3.Error as exc:
                self._broken(exc)

    def _hit(self, response: LLMResponse) -> LLMResponse:
        served = response.model_copy(update={"cached": True, "cost_usd": 0.0, "retries": 0})
        record_usage(served)
        return served

    async def aclose(self) -> None:
        """Close the cache and the inner client."""
        if self.cache is not None:
            with contextlib.suppress(sqlite3.Error):
                self.cache.close()
        close = getattr(self.inner, "aclose", None)
        if close is not None:
            await close()


def _describe(request: LLMRequest) -> str:
    last = request.messages[-1].content if request.messages else ""
    snippet = " ".join(last.split())
    snippet = snippet if len(snippet) <= 80 else snippet[:77] + "..."
    tool = f" via tool {request.tool.name}" if request.tool else ""
    return f"{snippet!r}{tool}"


class ReplayOnlyClient:
    """The inner client of a ``--cache-only`` run with no key configured: never called, since
    replay answers from the cache or raises :class:`ReplayMiss` first."""

    name = "anthropic"
    cache_namespace = ""

    def __init__(self, model: str) -> None:
        self.model = model

    async def complete(self, request: LLMRequest) -> LLMResponse:  # pragma: no cover - unreachable
        raise ReplayMiss(f"no cached reply for {request.model}", hint="run once without --cache-only")
