"""The Message Batches API as a batch backend (:mod:`evalloop.llm.batching`) of :class:`AnthropicClient`.

Requests go in with the same parameters as live calls (prompt-cache marks included), through the
real SDK's ``client.messages.batches`` (create, retrieve, results), each API call retried
by the client's policy. A result maps to what a live call gives: ``succeeded`` a reply priced at
the batch rate; ``errored`` the :class:`LLMCallFailed` of the status its error type stands for
(so a missing model stops the run, a failed request errors its case); ``expired`` and
``canceled`` an :class:`LLMCallFailed` — the infrastructure's failure, never a real 0.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from evalloop.llm.anthropic_reply import read_message
from evalloop.llm.errors import LLMCallFailed
from evalloop.llm.retry import call_with_retries
from evalloop.llm.types import LLMRequest, LLMResponse

if TYPE_CHECKING:
    from evalloop.llm.anthropic_client import AnthropicClient

ERROR_STATUS = {
    "invalid_request_error": 400, "authentication_error": 401, "billing_error": 402, "permission_error": 403,
    "not_found_error": 404, "request_too_large": 413, "rate_limit_error": 429, "api_error": 500,
    "timeout_error": 504, "overloaded_error": 529,
}
"""The HTTP status each error type of the Messages API stands for."""
LOOKUP_SLACK = timedelta(minutes=10)
"""How much earlier than the history's record a lost batch may carry (the provider's clock)."""


class AnthropicBatches:
    """Submit, poll and collect Message Batches for one :class:`AnthropicClient`."""

    name = "anthropic"
    max_requests = 100_000
    max_bytes = 256 * 1024 * 1024

    def __init__(self, client: AnthropicClient) -> None:
        self.client = client
        self.where = f"Message Batches API at {client.base_url}"

    def entry(self, custom_id: str, request: LLMRequest) -> dict[str, Any]:
        """One batch request: the live call's parameters (sampling settings in the body)."""
        params = self.client.params(request)
        params.update(params.pop("extra_body", None) or {})
        return {"custom_id": custom_id, "params": params}

    async def create(self, entries: list[dict[str, Any]]) -> str:
        """Submit one batch; its id."""
        batch = await self._call(lambda sdk: sdk.messages.batches.create(requests=entries))
        return str(batch.id)

    async def find(self, custom_ids: list[str], since: datetime, exclude: set[str]) -> str | None:
        """A lost batch, by the API's list (newest first): created after ``since`` (less
        :data:`LOOKUP_SLACK`), known to no run, holding as many requests — and, once it has
        ended, exactly these ``custom_ids`` (a batch carries no metadata of ours; the earliest
        such batch is taken)."""
        earliest, after = since - LOOKUP_SLACK, None
        found: list[Any] = []
        while True:
            cursor: dict[str, str] = {"after_id": after} if after else {}
            page = await self._call(lambda sdk, cursor=cursor: sdk.messages.batches.list(limit=100, **cursor))
            for batch in page.data:
                if batch.created_at < earliest:
                    return await self._first_matching(found, custom_ids)
                counts = batch.request_counts
                total = counts.processing + counts.succeeded + counts.errored + counts.canceled + counts.expired
                if batch.id not in exclude and total == len(custom_ids):
                    found.append(batch)
            if not page.has_more or not page.data:
                return await self._first_matching(found, custom_ids)
            after = page.last_id

    async def _first_matching(self, batches: list[Any], custom_ids: list[str]) -> str | None:
        for batch in sorted(batches, key=lambda b: b.created_at):
            if batch.processing_status != "ended" or set(await self.results(batch.id)) == set(custom_ids):
                return str(batch.id)
        return None

    async def ended(self, batch_id: str) -> bool:
        """Whether the batch has ended (every request has a result)."""
        batch = await self._call(lambda sdk: sdk.messages.batches.retrieve(batch_id))
        return batch.processing_status == "ended"

    async def results(self, batch_id: str) -> dict[str, dict[str, Any]]:
        """An ended batch's results by ``custom_id`` (the JSONL read raw, not through SDK models)."""

        async def read(sdk: Any) -> bytes:
            raw = await sdk.messages.batches.with_raw_response.results(batch_id)
            return bytes(await raw.read())

        body = await self._call(read)
        results: dict[str, dict[str, Any]] = {}
        for line in body.splitlines():
            if line.strip():
                item = json.loads(line)
                results[str(item.get("custom_id"))] = item.get("result") or {}
        return results

    def response(self, result: dict[str, Any] | None, request: LLMRequest) -> LLMResponse:
        """The reply in one result, or the error a live call would have raised."""
        kind = (result or {}).get("type")
        if result is None:
            raise LLMCallFailed("the batch ended without a result for this request", where=self.where)
        if kind == "succeeded":
            try:
                return read_message(result.get("message"), request, self.client.prices, batch=True)
            except TypeError as error:
                raise self.client._malformed(str(error)) from error
        if kind == "errored":
            detail = (result.get("error") or {}).get("error") or result.get("error") or {}
            status = ERROR_STATUS.get(str(detail.get("type")), 500)
            raise LLMCallFailed(f"batch request failed: HTTP {status} {detail.get('type', '')}: "
                                f"{detail.get('message', '')}", status=status, where=self.where)
        if kind == "expired":
            raise LLMCallFailed("the batch expired (24 h) before this request was processed", where=self.where,
                                hint="run again; a smaller run or another hour may be served sooner")
        if kind == "canceled":
            raise LLMCallFailed("the batch was canceled before this request was processed", where=self.where)
        raise LLMCallFailed(f"a batch result of unknown type {kind!r}", where=self.where)

    async def _call(self, call: Any) -> Any:
        client = self.client

        async def attempt() -> Any:
            with client.api_errors():
                return await call(client.sdk())

        value, _ = await call_with_retries(attempt, client.policy, where=self.where, url_setting="ANTHROPIC_BASE_URL")
        return value
