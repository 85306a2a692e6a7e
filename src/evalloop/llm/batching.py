"""Batch mode: a client that sends a run's LLM calls through a provider's batch API, at half price.

:class:`BatchingClient` is an :class:`~evalloop.llm.types.LLMClient` like any other: a judge or a
target awaits ``complete(request)``. Requests made within ``window`` seconds of each other (at
most ``max_wait`` after the first) are submitted together, in chunks within the API's limits
(count and bytes); each batch is polled with backoff (``poll`` seconds, growing by half up to
``poll_max``) until it ends, and its results are matched back to the waiting calls by
``custom_id``. The batch runner keeps every case in flight, so one batch carries a whole stage of
the run (the targets' calls, then the judges').

A ``custom_id`` is a hash of the request and its occurrence number in the run, so the same run
asks with the same ids again: a resumed run (:attr:`known`, custom_id -> batch id, read from the
history) collects a request from the batch it went out in instead of submitting and paying again.
``on_intent`` is told each submission (custom_ids) before it goes out, ``on_submit`` its batch id
as soon as the provider gives it, before any polling; a submission the killed run never learned
the id of (:attr:`lost`) is looked up at the provider (:meth:`BatchBackend.find`) before any of
its requests is submitted again.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from evalloop import faults
from evalloop.llm.budget import within_budget
from evalloop.llm.cache import cache_key
from evalloop.llm.errors import LLMCallFailed
from evalloop.llm.retry import RETRYABLE_STATUS
from evalloop.llm.types import ClosingClient, LLMClient, LLMRequest, LLMResponse
from evalloop.llm.usage import record_usage

if TYPE_CHECKING:
    from evalloop.environ import Environment

log = logging.getLogger("evalloop.llm.batching")
BATCH_RETRIES = 1
"""How often a request whose batch result failed with a retryable status is sent again (each time
in a later batch, which may take hours)."""
OnSubmit = Callable[[str, str, list[str], "str | None"], None]  # (provider, batch id, custom_ids, intent token)
OnIntent = Callable[[str, list[str]], str]  # (provider, custom_ids) -> the intent's token


@dataclass
class LostSubmission:
    """A submission a killed run recorded before it went out, whose batch id it never learned."""

    custom_ids: list[str]
    since: datetime  # when it was about to go out (a lookup takes batches created after it)
    token: str | None = None  # its intent under the resuming run
    wanted: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        self.wanted = frozenset(self.custom_ids)


class BatchBackend(Protocol):
    """A provider's batch API."""

    name: str
    max_requests: int
    max_bytes: int

    def entry(self, custom_id: str, request: LLMRequest) -> dict[str, Any]: ...
    async def create(self, entries: list[dict[str, Any]]) -> str: ...
    async def ended(self, batch_id: str) -> bool: ...
    async def results(self, batch_id: str) -> dict[str, dict[str, Any]]: ...
    def response(self, result: dict[str, Any] | None, request: LLMRequest) -> LLMResponse: ...
    async def find(self, custom_ids: list[str], since: datetime, exclude: set[str]) -> str | None:
        """The id of a batch created after ``since`` (not in ``exclude``) that holds exactly these
        requests, if the provider shows one."""
        ...


class BatchingClient(ClosingClient):
    """Send ``inner``'s requests through ``backend`` (see the module's note)."""

    def __init__(self, inner: LLMClient, backend: BatchBackend, *, window: float = 0.2, max_wait: float = 2.0,
                 poll: float = 5.0, poll_max: float = 60.0, known: Mapping[str, str] | None = None,
                 on_submit: OnSubmit | None = None, on_intent: OnIntent | None = None) -> None:
        self.inner, self.backend = inner, backend
        self.name, self.model = inner.name, inner.model
        self.cache_namespace = getattr(inner, "cache_namespace", "")  # batch and live replies are alike
        self.window, self.max_wait, self.poll, self.poll_max = window, max_wait, poll, poll_max
        self.known: dict[str, str] = dict(known or {})
        self.on_submit, self.on_intent = on_submit, on_intent
        self.lost: list[LostSubmission] = []  # a resumed run's submissions with no known batch id
        self.exclude: set[str] = set()         # batch ids the history knows (a lookup skips them)
        self.adopted: set[str] = set()         # batches a lookup found (checked against their results)
        self._finders: dict[int, asyncio.Task[str | None]] = {}
        self.submitted: list[str] = []  # the batches this client created
        self.resumed = 0                # requests collected from a batch an earlier process submitted
        self.polls = 0
        self._pending: list[tuple[str, LLMRequest, asyncio.Future[str]]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._first = 0.0
        self._occurrences: Counter[str] = Counter()
        self._collectors: dict[str, asyncio.Task[dict[str, dict[str, Any]]]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()

    async def complete(self, request: LLMRequest) -> LLMResponse:
        """The reply to ``request``, once the batch it went out in has ended."""
        prepare = getattr(self.inner, "prepared", None)
        request = prepare(request) if prepare is not None else request
        key = cache_key(request)[:40]
        self._occurrences[key] += 1
        custom_id = f"{key}-{self._occurrences[key]}"
        prices = getattr(self.inner, "prices", {})
        response = await within_budget(request, prices, lambda: self._call(custom_id, request), batch=True)
        record_usage(response, response.retries)
        return response

    async def _call(self, custom_id: str, request: LLMRequest) -> LLMResponse:
        """One request's reply; a result failed with a retryable status (overloaded, rate limited,
        a server error) goes out once more in a later batch, as a live call would be retried."""
        for attempt in range(BATCH_RETRIES + 1):
            key = custom_id if attempt == 0 else f"{custom_id}-r{attempt}"
            batch_id = self.known.get(key) or await self._recover(key)
            if batch_id is None:
                batch_id = await self._enqueue(key, request)
            results = await self._results(batch_id)
            if key not in results and batch_id in self.adopted:  # a lookup's guess that was not ours
                log.warning("batch %s ended without this run's requests: they are submitted", batch_id)
                batch_id = self.known[key] = await self._enqueue(key, request)
                results = await self._results(batch_id)
            elif batch_id not in self.submitted:
                self.resumed += 1
            try:
                response = self.backend.response(results.get(key), request)
            except LLMCallFailed as error:
                if error.status not in RETRYABLE_STATUS or attempt == BATCH_RETRIES:
                    raise
                continue
            response.retries = attempt
            return response
        raise AssertionError("unreachable")  # pragma: no cover

    async def _results(self, batch_id: str) -> dict[str, dict[str, Any]]:
        collector = self._collectors.get(batch_id)
        if collector is None:
            collector = self._collectors[batch_id] = self._spawn(self._collect(batch_id))
        return await asyncio.shield(collector)

    # -- a killed run's unrecorded batches ---------------------------------------------------------
    async def _recover(self, custom_id: str) -> str | None:
        """The batch a lost submission holding ``custom_id`` went out in (one lookup per submission)."""
        for index, lost in enumerate(self.lost):
            if custom_id in lost.wanted:
                finder = self._finders.get(index)
                if finder is None:
                    finder = self._finders[index] = self._spawn(self._find(lost))
                await asyncio.shield(finder)
                return self.known.get(custom_id)
        return None

    async def _find(self, lost: LostSubmission) -> str | None:
        try:
            batch_id = await self.backend.find(lost.custom_ids, lost.since, self.exclude)
        except Exception as error:  # noqa: BLE001 - not found: the requests go out again
            log.warning("could not look up a batch the killed run submitted (%s): its requests are submitted again",
                        str(error).splitlines()[0][:200])
            return None
        if batch_id is None:
            return None
        self.exclude.add(batch_id)
        self.adopted.add(batch_id)
        self.known.update(dict.fromkeys(lost.custom_ids, batch_id))
        self._tell(batch_id, lost.custom_ids, lost.token)
        return batch_id

    def _tell(self, batch_id: str, ids: list[str], token: str | None) -> None:
        if self.on_submit is not None:
            try:
                self.on_submit(self.backend.name, batch_id, ids, token)
            except Exception as error:  # noqa: BLE001 - the run goes on; only resuming is lost
                log.warning("batch %s not recorded in the history (a resume would look it up at the provider): %s",
                            batch_id, error)

    # -- submitting -------------------------------------------------------------------------------
    def _enqueue(self, custom_id: str, request: LLMRequest) -> asyncio.Future[str]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[str] = loop.create_future()
        if not self._pending:
            self._first = loop.time()
        self._pending.append((custom_id, request, future))
        if self._timer is not None:
            self._timer.cancel()
        if len(self._pending) >= self.backend.max_requests:
            self._flush()
        else:
            delay = min(self.window, max(0.0, self._first + self.max_wait - loop.time()))
            self._timer = loop.call_later(delay, self._flush)
        return future

    def _flush(self) -> None:
        items, self._pending, self._timer = self._pending, [], None
        if items:
            self._spawn(self._submit(items))

    async def _submit(self, items: list[tuple[str, LLMRequest, asyncio.Future[str]]]) -> None:
        for chunk in self._chunks(items):
            entries = [entry for entry, _ in chunk]
            futures = [future for _, future in chunk]
            ids = [entry["custom_id"] for entry in entries]
            token = None
            if self.on_intent is not None:
                try:
                    token = self.on_intent(self.backend.name, ids)
                except Exception as error:  # noqa: BLE001 - the run goes on; only resuming is lost
                    log.warning("a batch submission not recorded in the history: %s", error)
            faults.point("batch.submitting")
            try:
                batch_id = await self.backend.create(entries)
            except BaseException as error:  # every request of the chunk fails as its live call would
                for future in futures:
                    if not future.done():
                        future.set_exception(error)
                if not isinstance(error, Exception):
                    raise
                continue
            faults.point("batch.created")  # the provider holds the batch; the history does not know its id
            self.submitted.append(batch_id)
            self.known.update(dict.fromkeys(ids, batch_id))
            self._tell(batch_id, ids, token)
            for future in futures:
                if not future.done():
                    future.set_result(batch_id)

    def _chunks(self, items: list[tuple[str, LLMRequest, asyncio.Future[str]]]
                ) -> list[list[tuple[dict[str, Any], asyncio.Future[str]]]]:
        """The requests in batches within the API's count and size limits."""
        chunks: list[list[tuple[dict[str, Any], asyncio.Future[str]]]] = [[]]
        size = 0
        for custom_id, request, future in items:
            entry = self.backend.entry(custom_id, request)
            length = len(json.dumps(entry)) + 2
            if chunks[-1] and (len(chunks[-1]) >= self.backend.max_requests
                               or size + length > self.backend.max_bytes - 64):
                chunks.append([])
                size = 0
            chunks[-1].append((entry, future))
            size += length
        return chunks

    # -- collecting -------------------------------------------------------------------------------
    async def _collect(self, batch_id: str) -> dict[str, dict[str, Any]]:
        delay = self.poll
        while True:
            self.polls += 1
            if await self.backend.ended(batch_id):
                return await self.backend.results(batch_id)
            await asyncio.sleep(delay)
            delay = min(delay * 1.5, self.poll_max)

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def aclose(self) -> None:
        """Stop polling (the batches themselves go on: a resumed run collects them) and close ``inner``."""
        if self._timer is not None:
            self._timer.cancel()
        for task in list(self._tasks):
            task.cancel()
        close = getattr(self.inner, "aclose", None)
        if close is not None:
            await close()


def batching(client: LLMClient, env: Environment | None = None) -> BatchingClient | None:
    """``client`` in batch mode, with ``EVALLOOP_BATCH_POLL`` / ``_POLL_MAX`` / ``_WINDOW`` (seconds)
    applied (``env``: the settings' environment; default: the process's); ``None`` when its
    provider has no batch API evalloop can use."""
    from evalloop.environ import environment

    backend = batch_backend(client)
    if backend is None:
        return None
    env = env or environment()
    return BatchingClient(client, backend,
                          window=env.batch_window if env.batch_window is not None else 0.2,
                          poll=env.batch_poll if env.batch_poll is not None else 5.0,
                          poll_max=env.batch_poll_max if env.batch_poll_max is not None else 60.0)


def batch_backend(client: LLMClient) -> BatchBackend | None:
    """The batch API of ``client``'s provider, or ``None`` when evalloop has none for it."""
    from evalloop.llm.anthropic_client import AnthropicClient
    from evalloop.llm.openai_client import OpenAICompatClient

    if isinstance(client, AnthropicClient):
        from evalloop.llm.anthropic_batches import AnthropicBatches

        return AnthropicBatches(client)
    if isinstance(client, OpenAICompatClient):
        from evalloop.llm.openai_batches import OpenAIBatches

        return OpenAIBatches(client)
    return None
