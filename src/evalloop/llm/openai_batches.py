"""The OpenAI Batch API (``/v1/files`` + ``/v1/batches``) as a batch backend of :class:`OpenAICompatClient`.

The requests go up as one JSONL file of ``/v1/chat/completions`` bodies (the live calls' bodies),
the batch is polled until it is ``completed``, ``expired``, ``cancelled`` or ``failed``, and the
output and error files are read back by ``custom_id``. A result maps to what a live call gives:
a 200 body is a reply priced at the batch rate, another status the error of that status, an
expired or cancelled request an :class:`LLMCallFailed` (the infrastructure's failure).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from evalloop.llm.errors import LLMCallFailed
from evalloop.llm.retry import call_with_retries
from evalloop.llm.types import LLMRequest, LLMResponse

if TYPE_CHECKING:
    from evalloop.llm.openai_client import OpenAICompatClient

ENDED = {"completed", "expired", "cancelled", "failed"}
LOOKUP_SLACK = timedelta(minutes=10)
"""How much earlier than the history's record a lost batch may carry (the provider's clock)."""


class OpenAIBatches:
    """Upload, submit, poll and collect OpenAI batches for one :class:`OpenAICompatClient`."""

    name = "openai-compat"
    max_requests = 50_000
    max_bytes = 200 * 1024 * 1024

    def __init__(self, client: OpenAICompatClient) -> None:
        self.client = client
        self.where = f"Batch API at {client.base_url}"

    def entry(self, custom_id: str, request: LLMRequest) -> dict[str, Any]:
        """One line of the batch's input file."""
        return {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions",
                "body": self.client.body(request)}

    async def create(self, entries: list[dict[str, Any]]) -> str:
        """Upload the requests and submit one batch; its id."""
        data = "".join(json.dumps(e) + "\n" for e in entries).encode()
        upload = await self._json("POST", "/files", data={"purpose": "batch"},
                                  files={"file": ("batch.jsonl", data, "application/jsonl")})
        batch = await self._json("POST", "/batches", json={"input_file_id": upload["id"], "completion_window": "24h",
                                                           "endpoint": "/v1/chat/completions"})
        return str(batch["id"])

    async def find(self, custom_ids: list[str], since: datetime, exclude: set[str]) -> str | None:
        """A lost batch, by the API's list (newest first): created after ``since`` (less
        :data:`LOOKUP_SLACK`), known to no run, whose input file holds exactly these ``custom_ids``."""
        earliest, after, wanted = (since - LOOKUP_SLACK).timestamp(), None, set(custom_ids)
        found: list[dict[str, Any]] = []
        while True:
            page = await self._json("GET", "/batches", params={"limit": 100, **({"after": after} if after else {})})
            data = [b for b in page.get("data") or [] if isinstance(b, dict)]
            for batch in data:
                if float(batch.get("created_at") or 0) < earliest:
                    break
                if batch.get("id") not in exclude and batch.get("input_file_id"):
                    found.append(batch)
            else:
                if page.get("has_more") and data:
                    after = str(data[-1].get("id"))
                    continue
            break
        for batch in sorted(found, key=lambda b: float(b.get("created_at") or 0)):
            body = await self._bytes("GET", f"/files/{batch['input_file_id']}/content")
            ids = {json.loads(line).get("custom_id") for line in body.splitlines() if line.strip()}
            if ids == wanted:
                return str(batch["id"])
        return None

    async def ended(self, batch_id: str) -> bool:
        """Whether the batch has ended (its output and error files are final)."""
        batch = await self._json("GET", f"/batches/{batch_id}")
        return batch.get("status") in ENDED

    async def results(self, batch_id: str) -> dict[str, dict[str, Any]]:
        """An ended batch's output and error lines by ``custom_id``."""
        batch = await self._json("GET", f"/batches/{batch_id}")
        results: dict[str, dict[str, Any]] = {}
        for key in ("output_file_id", "error_file_id"):
            if batch.get(key):
                body = await self._bytes("GET", f"/files/{batch[key]}/content")
                for line in body.splitlines():
                    if line.strip():
                        item = json.loads(line)
                        results[str(item.get("custom_id"))] = item
        if batch.get("status") == "failed" and not results:
            errors = ((batch.get("errors") or {}).get("data") or [{}])
            raise LLMCallFailed(f"the batch failed: {errors[0].get('message', 'no reason given')}", where=self.where)
        return results

    def response(self, result: dict[str, Any] | None, request: LLMRequest) -> LLMResponse:
        """The reply in one output line, or the error a live call would have raised."""
        if result is None:
            raise LLMCallFailed("the batch ended without a result for this request", where=self.where)
        reply = result.get("response") or {}
        error = result.get("error") or {}
        status = int(reply.get("status_code") or 0)
        if status == 200:
            return self.client.read(request, reply.get("body"), batch=True)
        if error.get("code") == "batch_expired":
            raise LLMCallFailed("the batch expired (24 h) before this request was processed", where=self.where)
        if error.get("code") == "batch_cancelled":
            raise LLMCallFailed("the batch was cancelled before this request was processed", where=self.where)
        body = reply.get("body") or {}
        detail = (body.get("error") or {}) if isinstance(body, dict) else {}
        raise LLMCallFailed(f"batch request failed: HTTP {status or '?'}: "
                            f"{detail.get('message') or error.get('message') or 'no reason given'}",
                            status=status or None, where=self.where)

    async def _bytes(self, method: str, path: str, **kw: Any) -> bytes:
        client = self.client

        async def attempt() -> bytes:
            return client.checked(await client.http(method, f"{client.base_url}{path}", **kw)).content

        value, _ = await call_with_retries(attempt, client.policy, where=self.where,
                                           url_setting="EVALLOOP_LLM_BASE_URL")
        return value

    async def _json(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        body = await self._bytes(method, path, **kw)
        try:
            data = json.loads(body)
        except ValueError:
            data = None
        if not isinstance(data, dict):
            raise LLMCallFailed(f"not a Batch API reply: {body[:80]!r}", where=self.where,
                                hint="check EVALLOOP_LLM_BASE_URL points at the API root with /v1")
        return data
