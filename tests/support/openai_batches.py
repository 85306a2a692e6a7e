"""The OpenAI Batch API of the loopback LLM server: ``POST /v1/files`` (a JSONL upload, purpose
``batch``), ``POST /v1/batches``, ``GET /v1/batches`` (the list, newest first), ``GET /v1/batches/{id}`` and
``GET /v1/files/{id}/content``.

A batch is ``in_progress`` until the Messages desk lets batches end (its ``held`` and ``delay``
apply here too); then every line is answered as ``/v1/chat/completions`` would (the server's
script and responder), successes into the output file and failures into the error file. A
scripted reply with ``batch_result="expired"`` ends its request with ``batch_expired``.
"""

from __future__ import annotations

import email.parser
import email.policy
import json
import threading
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .messages_server import LLMServer


@dataclass
class _Batch:
    id: str
    lines: list[dict[str, Any]]
    created: float
    input_file_id: str | None = None
    status: str = "in_progress"
    output_file_id: str | None = None
    error_file_id: str | None = None


class OpenAIBatchDesk:
    """Files and batches of the OpenAI Batch API; ``submissions`` counts created batches."""

    def __init__(self, server: LLMServer) -> None:
        self.server = server
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, _Batch] = {}
        self._lock = threading.Lock()

    @property
    def submissions(self) -> int:
        with self._lock:
            return len(self.batches)

    def post(self, path: str, raw: bytes, content_type: str) -> tuple[int, dict[str, Any]]:
        if path == "/v1/files":
            message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
                f"content-type: {content_type}\r\n\r\n".encode() + raw)
            data = next((p.get_payload(decode=True) for p in message.iter_parts()
                         if p.get_param("name", header="content-disposition") == "file"), None)
            if not data:
                return 400, _error("no file in the upload")
            file_id = f"file-{uuid.uuid4().hex[:24]}"
            with self._lock:
                self.files[file_id] = data
            return 200, {"id": file_id, "object": "file", "bytes": len(data), "purpose": "batch"}
        if path == "/v1/batches":
            body = json.loads(raw or b"{}")
            data = self.files.get(str(body.get("input_file_id")))
            if data is None or body.get("endpoint") != "/v1/chat/completions":
                return 400, _error("input_file_id and endpoint /v1/chat/completions are required")
            lines = [json.loads(line) for line in data.splitlines() if line.strip()]
            batch = _Batch(f"batch_{uuid.uuid4().hex[:24]}", lines, time.time(), str(body["input_file_id"]))
            with self._lock:
                self.batches[batch.id] = batch
            return 200, self._shape(batch)
        return 404, _error(f"no route {path}")

    def get(self, path: str) -> tuple[int, dict[str, Any], bytes | None]:
        parts = path.strip("/").split("/")
        if parts == ["v1", "batches"]:  # the list, newest first, on one page
            with self._lock:
                batches = sorted(self.batches.values(), key=lambda b: b.created, reverse=True)
            return 200, {"object": "list", "data": [self._shape(b) for b in batches], "has_more": False}, None
        if len(parts) == 3 and parts[:2] == ["v1", "batches"] and parts[2] in self.batches:
            batch = self.batches[parts[2]]
            self._settle(batch)
            return 200, self._shape(batch), None
        if len(parts) == 4 and parts[:2] == ["v1", "files"] and parts[3] == "content" and parts[2] in self.files:
            return 200, {}, self.files[parts[2]]
        return 404, _error(f"no route {path}"), None

    def _settle(self, batch: _Batch) -> None:
        from .messages_server import Seen

        desk = self.server.batches
        with self._lock:
            if batch.status != "in_progress" or desk.held.is_set() or time.time() < batch.created + desk.delay:
                return
            batch.status = "finalizing"
        out, errors = [], []
        for line in batch.lines:
            scripted = self.server.peek()
            seen = Seen("/v1/chat/completions", {"x-batch-id": batch.id}, dict(line.get("body") or {}))
            status, body = self.server.answer_openai(seen)
            row = {"id": f"batch_req_{uuid.uuid4().hex[:20]}", "custom_id": line.get("custom_id")}
            if scripted is not None and scripted.batch_result == "expired":
                errors.append({**row, "response": None,
                               "error": {"code": "batch_expired", "message": "This request could not be "
                                         "executed before the completion window expired."}})
            elif status >= 400:
                errors.append({**row, "response": {"status_code": status, "body": body}, "error": None})
            else:
                out.append({**row, "response": {"status_code": 200, "body": body}, "error": None})
        with self._lock:
            if out:
                batch.output_file_id = f"file-{uuid.uuid4().hex[:24]}"
                self.files[batch.output_file_id] = "".join(json.dumps(r) + "\n" for r in out).encode()
            if errors:
                batch.error_file_id = f"file-{uuid.uuid4().hex[:24]}"
                self.files[batch.error_file_id] = "".join(json.dumps(r) + "\n" for r in errors).encode()
            batch.status = "completed"

    def _shape(self, batch: _Batch) -> dict[str, Any]:
        return {"id": batch.id, "object": "batch", "endpoint": "/v1/chat/completions", "status": batch.status,
                "input_file_id": batch.input_file_id, "output_file_id": batch.output_file_id,
                "error_file_id": batch.error_file_id, "created_at": int(batch.created),
                "request_counts": {"total": len(batch.lines)}}


def _error(message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "code": None}}
