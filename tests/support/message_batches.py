"""The Message Batches endpoints of the loopback LLM server (what the real ``anthropic`` SDK's
``client.messages.batches`` calls).

``POST /v1/messages/batches`` takes up to 100,000 requests (unique ``custom_id`` each) and answers
a ``message_batch`` in ``in_progress``; ``GET /v1/messages/batches/{id}`` reports it ``ended``
once ``delay`` seconds have passed and the desk is not ``held`` — then every request is answered
as ``/v1/messages`` would (the server's script and responder, prompt caching included) — and
``GET .../results`` streams the JSONL results, ``GET /v1/messages/batches`` lists them (newest
first); ``POST .../cancel`` cancels what is not answered yet. A scripted :class:`Reply` with
``batch_result`` set to ``"expired"`` or ``"canceled"`` gives that result instead of a message,
one with an error status an ``errored`` result. The desk counts submissions
(``submissions``), so a test can tell a resumed run submitted nothing twice.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .messages_server import LLMServer

MAX_REQUESTS = 100_000
PREFIX = "/v1/messages/batches"


def _stamp(at: float | None) -> str | None:
    return None if at is None else datetime.fromtimestamp(at, UTC).isoformat().replace("+00:00", "Z")


@dataclass
class Batch:
    """One submitted batch: its requests, and once ended, a result per ``custom_id``."""

    id: str
    requests: list[dict[str, Any]]
    created: float
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    ended: float | None = None
    cancel_at: float | None = None


class BatchDesk:
    """The server's batches; ``delay`` seconds of processing, ``held`` keeps every batch in progress."""

    def __init__(self, server: LLMServer, delay: float = 0.0) -> None:
        self.server = server
        self.delay = delay
        self.held = threading.Event()
        self.batches: dict[str, Batch] = {}
        self.polls = 0
        self._lock = threading.Lock()

    @property
    def submissions(self) -> int:
        """How many batches were created."""
        with self._lock:
            return len(self.batches)

    @property
    def submitted_requests(self) -> int:
        """How many requests all batches held."""
        with self._lock:
            return sum(len(b.requests) for b in self.batches.values())

    # -- routes -------------------------------------------------------------------------------
    def post(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any], None]:
        if path == PREFIX:
            return (*self._create(body), None)
        parts = path[len(PREFIX) + 1:].split("/")
        if len(parts) == 2 and parts[1] == "cancel" and parts[0] in self.batches:
            batch = self.batches[parts[0]]
            with self._lock:
                if batch.ended is None:
                    batch.cancel_at = time.time()
            self._settle(batch)
            return 200, self._shape(batch), None
        return 404, _error("not_found_error", f"no batch at {path}"), None

    def get(self, path: str) -> tuple[int, dict[str, Any], bytes | None]:
        if path == PREFIX:  # the list, newest first, on one page
            with self._lock:
                batches = sorted(self.batches.values(), key=lambda b: b.created, reverse=True)
            data = [self._shape(b) for b in batches]
            return 200, {"data": data, "has_more": False, "first_id": data[0]["id"] if data else None,
                         "last_id": data[-1]["id"] if data else None}, None
        parts = path[len(PREFIX) + 1:].split("/") if path.startswith(PREFIX + "/") else []
        batch = self.batches.get(parts[0]) if parts else None
        if batch is None:
            return 404, _error("not_found_error", f"no batch at {path}"), None
        with self._lock:
            self.polls += 1
        self._settle(batch)
        if len(parts) == 1:
            return 200, self._shape(batch), None
        if parts[1:] == ["results"]:
            if batch.ended is None:
                return 400, _error("invalid_request_error", "batch is still processing"), None
            lines = [json.dumps({"custom_id": r["custom_id"], "result": batch.results[r["custom_id"]]})
                     for r in batch.requests]
            return 200, {}, ("\n".join(lines) + "\n").encode()
        return 404, _error("not_found_error", path), None

    # -- the work -----------------------------------------------------------------------------
    def _create(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        requests = body.get("requests")
        if not isinstance(requests, list) or not requests:
            return 400, _error("invalid_request_error", "requests: a non-empty list is required")
        if len(requests) > MAX_REQUESTS:
            return 400, _error("invalid_request_error", f"at most {MAX_REQUESTS} requests per batch")
        ids = [r.get("custom_id") for r in requests if isinstance(r, dict)]
        if len(set(ids)) != len(requests) or not all(isinstance(i, str) and 0 < len(i) <= 64 for i in ids):
            return 400, _error("invalid_request_error", "custom_id: unique strings of 1-64 characters")
        batch = Batch(f"msgbatch_{uuid.uuid4().hex[:24]}", requests, time.time())
        with self._lock:
            self.batches[batch.id] = batch
        return 200, self._shape(batch)

    def _settle(self, batch: Batch) -> None:
        """Answer a batch's requests once it may end (or cancel them)."""
        from .messages_server import Seen

        with self._lock:
            if batch.ended is not None:
                return
            canceled = batch.cancel_at is not None
            if not canceled and (self.held.is_set() or time.time() < batch.created + self.delay):
                return
            batch.ended = time.time()  # claimed: answered once, here
        for item in batch.requests:
            if canceled:
                batch.results[item["custom_id"]] = {"type": "canceled"}
                continue
            seen = Seen("/v1/messages", {"x-batch-id": batch.id}, dict(item.get("params") or {}))
            batch.results[item["custom_id"]] = self._result(seen)

    def _result(self, seen: Any) -> dict[str, Any]:
        scripted = self.server.peek()
        if scripted is not None and scripted.batch_result in ("expired", "canceled"):
            self.server.answer(seen)  # take it off the script (and count it)
            return {"type": scripted.batch_result}
        status, body = self.server.answer(seen)
        if status >= 400:
            return {"type": "errored", "error": body}
        return {"type": "succeeded", "message": body}

    def _shape(self, batch: Batch) -> dict[str, Any]:
        counts = {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        if batch.ended is None:
            counts["processing"] = len(batch.requests)
        else:
            for result in batch.results.values():
                counts[result["type"]] += 1
        url = f"{self.server.url}{PREFIX}/{batch.id}/results" if batch.ended is not None else None
        return {
            "id": batch.id, "type": "message_batch",
            "processing_status": "ended" if batch.ended is not None else
            ("canceling" if batch.cancel_at is not None else "in_progress"),
            "request_counts": counts, "created_at": _stamp(batch.created), "ended_at": _stamp(batch.ended),
            "expires_at": _stamp(batch.created + timedelta(hours=24).total_seconds()),
            "archived_at": None, "cancel_initiated_at": _stamp(batch.cancel_at), "results_url": url,
        }


def _error(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}
