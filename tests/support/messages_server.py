"""A loopback LLM server for tests and benches: Messages API and OpenAI chat completions.

One threaded HTTP server on 127.0.0.1 and a free port answers ``POST /v1/messages`` with real
Messages-API shapes (``message`` objects with text and ``tool_use`` blocks, ``usage``,
``stop_reason``, ids, ``error`` bodies) and ``POST /v1/chat/completions`` with chat-completion
shapes (``tool_calls``, ``finish_reason``, ``usage``), or, when told, a 200 whose body is not
the API's shape (an HTML page, ``{}``, truncated JSON). Each request takes the next scripted
:class:`Reply` from a queue, or asks ``responder`` when the queue is empty. It records every
request, so tests can count API calls.

Prompt caching is billed as the API does: a prefix marked with ``cache_control`` (the tools and
the system blocks up to the marked one) at least the model's minimum cacheable length long is a
cache write the first time and a cache read afterwards; a shorter one is plain input. The Message
Batches endpoints are served by :mod:`tests.support.message_batches`.
"""

from __future__ import annotations

import collections
import json
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


@dataclass
class Seen:
    """One request the server received."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    peer: tuple[str, int] | None = None  # the client's address: one per connection
    at: float = field(default_factory=time.monotonic)  # when it arrived (this process's monotonic clock)

    @property
    def forced_tool(self) -> str | None:
        """The tool the request forces, in either API's spelling."""
        choice = self.body.get("tool_choice") or {}
        if choice.get("type") == "tool":
            return choice.get("name")
        if choice.get("type") == "function":
            return (choice.get("function") or {}).get("name")
        return None

    @property
    def system_text(self) -> str:
        """The system prompt, a string or the text of its blocks."""
        return _system_text(self.body.get("system"))

    @property
    def cache_marked(self) -> bool:
        """Whether the request marks a prefix for prompt caching."""
        return _cached_prefix(self.body) is not None

    @property
    def last_user_text(self) -> str:
        """The content of the last user message."""
        users = [m for m in self.body.get("messages", []) if m.get("role") == "user"]
        content = users[-1]["content"] if users else ""
        if isinstance(content, list):
            return "".join(b.get("text", "") for b in content if isinstance(b, dict))
        return str(content)


@dataclass
class Reply:
    """What the server answers to one request."""

    status: int = 200
    text: str | None = None
    tool_input: dict[str, Any] | None = None
    stop_reason: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    error_type: str = "api_error"
    error_message: str = "Internal server error"
    raw_body: bytes | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    model: str | None = None
    content_type: str = "application/json"
    batch_result: str | None = None  # in a batch: "expired" or "canceled" instead of a message

    @classmethod
    def of_text(cls, text: str, **kw: Any) -> Reply:
        """A text reply."""
        return cls(text=text, **kw)

    @classmethod
    def of_tool(cls, tool_input: dict[str, Any], **kw: Any) -> Reply:
        """A tool call of the forced tool with ``tool_input``."""
        return cls(tool_input=tool_input, **kw)

    @classmethod
    def refusal(cls, text: str = "I can't help with that.", **kw: Any) -> Reply:
        """A refusal (``stop_reason: refusal``; ``message.refusal`` on the OpenAI side)."""
        return cls(text=text, stop_reason="refusal", **kw)

    @classmethod
    def error(cls, status: int, error_type: str, message: str, retry_after: float | None = None) -> Reply:
        """An error response, optionally with ``retry-after`` seconds."""
        headers = {"retry-after": f"{retry_after:g}"} if retry_after is not None else {}
        return cls(status=status, error_type=error_type, error_message=message, headers=headers)

    @classmethod
    def rate_limited(cls, retry_after: float | None = None) -> Reply:
        """429 rate_limit_error."""
        return cls.error(429, "rate_limit_error", "Rate limited", retry_after)

    @classmethod
    def overloaded(cls) -> Reply:
        """529 overloaded_error."""
        return cls.error(529, "overloaded_error", "Overloaded")

    @classmethod
    def server_error(cls) -> Reply:
        """500 api_error."""
        return cls.error(500, "api_error", "Internal server error")

    # -- a 200 whose body is not the API's shape (a proxy's page, a broken gateway) -----------
    @classmethod
    def html(cls, content_type: str = "text/html; charset=utf-8") -> Reply:
        """200 with an HTML page (as a captive portal or a misrouted proxy sends)."""
        page = b"<!doctype html><html><body><h1>502 Bad Gateway</h1></body></html>"
        return cls(raw_body=page, content_type=content_type)

    @classmethod
    def empty_object(cls) -> Reply:
        """200 with ``{}``."""
        return cls(raw_body=b"{}")

    @classmethod
    def bad_json(cls) -> Reply:
        """200 with JSON cut off half-way."""
        return cls(raw_body=b'{"id": "msg_1", "type": "message", "content": [{"type": "te')


Responder = Callable[[Seen], Reply]


@dataclass
class Reflecting:
    """A responder with two models: a *reflecting model* — ``reflect``, a function of the prompt it
    receives (the last user message's text) to its reply's text — answers the requests whose
    system prompt contains ``marker``; the task's own model (``task``) answers the rest. What the
    reflecting model was shown is kept in ``prompts``, so a test can check what reflection read."""

    reflect: Callable[[str], str]
    task: Responder
    marker: str
    prompts: list[str] = field(default_factory=list)

    def __call__(self, seen: Seen) -> Reply:
        if self.marker in seen.system_text:
            prompt = seen.last_user_text
            self.prompts.append(prompt)
            return Reply.of_text(self.reflect(prompt))
        return self.task(seen)


class _Server(ThreadingHTTPServer):
    request_queue_size = 256  # the listen backlog: bursts of new connections are not refused
    daemon_threads = True
    block_on_close = False


def _tokens(text: str) -> int:
    return max(1, len(text) // 4)


MIN_CACHEABLE = {"claude-haiku-4-5": 4096, "claude-sonnet-4-5": 1024, "claude-opus-4-1": 1024}
"""The published minimum cacheable prefix per model (tokens); other models: 1024."""


def _min_cacheable(model: str) -> int:
    names = [name for name in MIN_CACHEABLE if model.startswith(name)]
    return MIN_CACHEABLE[max(names, key=len)] if names else 1024


def _system_text(system: Any) -> str:
    if isinstance(system, list):
        return "".join(str(b.get("text", "")) for b in system if isinstance(b, dict))
    return str(system or "")


def _cached_prefix(body: dict[str, Any]) -> str | None:
    """The text of the prefix the request marks for caching (tools, then system blocks up to the
    last one with ``cache_control``), or ``None`` when it marks none."""
    system = body.get("system")
    if not isinstance(system, list):
        return None
    marked = [i for i, b in enumerate(system) if isinstance(b, dict) and b.get("cache_control")]
    if not marked:
        return None
    blocks = system[: marked[-1] + 1]
    return json.dumps(body.get("tools") or []) + "".join(str(b.get("text", "")) for b in blocks)


class LLMServer:
    """The loopback server; use as a context manager or call :meth:`start` / :meth:`stop`."""

    def __init__(self, responder: Responder | None = None, latency: float = 0.0) -> None:
        self.responder: Responder = responder or (lambda seen: Reply.of_text("ok"))
        self.latency = latency
        self.requests: list[Seen] = []
        self._script: collections.deque[Reply] = collections.deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._active = 0
        self.max_active = 0
        self.prefixes: set[str] = set()  # prompt-cache entries (never expire here)
        from .message_batches import BatchDesk
        from .openai_batches import OpenAIBatchDesk

        self.batches = BatchDesk(self)
        self.openai_batches = OpenAIBatchDesk(self)
        self._httpd = _Server(("127.0.0.1", 0), self._handler_class())
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The root URL (the Anthropic SDK's ``base_url``)."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def openai_url(self) -> str:
        """The OpenAI-compatible ``base_url`` (with ``/v1``)."""
        return f"{self.url}/v1"

    @property
    def count(self) -> int:
        """How many requests arrived."""
        with self._lock:
            return len(self.requests)

    def script(self, *replies: Reply) -> None:
        """Queue replies for the next requests, in order (then ``responder`` answers)."""
        with self._lock:
            self._script.extend(replies)

    def start(self) -> LLMServer:
        """Serve in a daemon thread."""
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket; slow replies in flight are abandoned."""
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> LLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def cache_usage(self, body: dict[str, Any]) -> tuple[int, int, int]:
        """Prompt caching of one request: (uncached prefix tokens to drop from the input count,
        cache-write tokens, cache-read tokens)."""
        prefix = _cached_prefix(body)
        if prefix is None:
            return 0, 0, 0
        tokens = _tokens(prefix)
        if tokens < _min_cacheable(str(body.get("model", ""))):
            return 0, 0, 0
        with self._lock:
            seen_before = prefix in self.prefixes
            self.prefixes.add(prefix)
        return tokens, (0 if seen_before else tokens), (tokens if seen_before else 0)

    def answer(self, seen: Seen) -> tuple[int, dict[str, Any]]:
        """The status and body of a Messages-API reply to ``seen`` (a batch request's result)."""
        reply = self._next(seen)
        try:
            if reply.status >= 400 or reply.raw_body is not None:
                return (reply.status if reply.status >= 400 else 500), _error_body(reply, False)
            return 200, _message(seen, reply, self)
        finally:
            self._done()

    def answer_openai(self, seen: Seen) -> tuple[int, dict[str, Any]]:
        """The status and body of a chat-completion reply to ``seen`` (an OpenAI batch line's)."""
        reply = self._next(seen)
        try:
            if reply.status >= 400 or reply.raw_body is not None:
                return (reply.status if reply.status >= 400 else 500), _error_body(reply, True)
            return 200, _chat_completion(seen, reply)
        finally:
            self._done()

    def peek(self) -> Reply | None:
        """The next scripted reply, left in the queue."""
        with self._lock:
            return self._script[0] if self._script else None

    def _next(self, seen: Seen) -> Reply:
        with self._lock:
            self.requests.append(seen)
            scripted = self._script.popleft() if self._script else None
            self._active += 1
            self.max_active = max(self.max_active, self._active)
        return scripted or self.responder(seen)

    def _done(self) -> None:
        with self._lock:
            self._active -= 1

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # no 40 ms delayed-ACK stalls between writes

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

            def do_GET(self) -> None:  # noqa: N802
                path = self.path.split("?")[0]
                desk = server.batches if path.startswith("/v1/messages/") else server.openai_batches
                status, payload, jsonl = desk.get(path)
                if jsonl is not None:
                    self._send_bytes(status, jsonl, {}, "application/binary")
                else:
                    self._send(status, payload, {})

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {}
                path = self.path.split("?")[0]
                if path.startswith("/v1/messages/batches"):
                    status, payload, _ = server.batches.post(path, body)
                    self._send(status, payload, {})
                    return
                if path in ("/v1/files", "/v1/batches"):
                    status, payload = server.openai_batches.post(path, raw, self.headers.get("content-type", ""))
                    self._send(status, payload, {})
                    return
                seen = Seen(path, {k.lower(): v for k, v in self.headers.items()}, body, self.client_address[:2])
                if path not in ("/v1/messages", "/v1/chat/completions"):
                    self._send(404, {"error": {"type": "not_found_error", "message": path}}, {})
                    return
                reply = server._next(seen)
                try:
                    delay = server.latency + reply.delay
                    if delay > 0 and server._stopping.wait(delay):
                        return
                    openai = path == "/v1/chat/completions"
                    if reply.raw_body is not None:
                        self._send_bytes(reply.status, reply.raw_body, reply.headers, reply.content_type)
                    elif reply.status >= 400:
                        self._send(reply.status, _error_body(reply, openai), reply.headers)
                    elif openai:
                        self._send(200, _chat_completion(seen, reply), reply.headers)
                    else:
                        self._send(200, _message(seen, reply, server), reply.headers)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                finally:
                    server._done()

            def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str]) -> None:
                self._send_bytes(status, json.dumps(payload).encode(), headers)

            def _send_bytes(self, status: int, data: bytes, headers: dict[str, str],
                            content_type: str = "application/json") -> None:
                self.send_response(status)
                self.send_header("content-type", content_type)
                self.send_header("content-length", str(len(data)))
                self.send_header("request-id", f"req_{uuid.uuid4().hex[:24]}")
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

        return Handler


def _error_body(reply: Reply, openai: bool) -> dict[str, Any]:
    if openai:
        return {"error": {"message": reply.error_message, "type": reply.error_type, "code": None}}
    return {
        "type": "error",
        "error": {"type": reply.error_type, "message": reply.error_message},
        "request_id": f"req_{uuid.uuid4().hex[:24]}",
    }


def _usage(seen: Seen, reply: Reply) -> tuple[int, int]:
    """The reply's token counts, or estimates from the text when it gives none."""
    input_tokens, output_tokens = reply.input_tokens, reply.output_tokens
    if input_tokens is None:
        input_tokens = _tokens(json.dumps(seen.body.get("messages", [])) + _system_text(seen.body.get("system")))
    if output_tokens is None:
        output_tokens = _tokens((reply.text or "") + (json.dumps(reply.tool_input) if reply.tool_input else ""))
    return input_tokens, output_tokens


def _tool_name(seen: Seen) -> str:
    if seen.forced_tool:
        return seen.forced_tool
    tools = seen.body.get("tools") or [{}]
    return tools[0].get("name") or (tools[0].get("function") or {}).get("name") or "tool"


def _message(seen: Seen, reply: Reply, server: LLMServer | None = None) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if reply.text is not None:
        content.append({"type": "text", "text": reply.text})
    if reply.tool_input is not None:
        content.append(
            {
                "type": "tool_use",
                "id": f"toolu_{uuid.uuid4().hex[:24]}",
                "name": _tool_name(seen),
                "input": reply.tool_input,
            }
        )
    stop = reply.stop_reason or ("tool_use" if reply.tool_input is not None else "end_turn")
    input_tokens, output_tokens = _usage(seen, reply)
    dropped, written, read = server.cache_usage(seen.body) if server is not None else (0, 0, 0)
    if dropped and reply.input_tokens is None:  # the cached prefix is billed apart from the input
        input_tokens = max(1, _tokens(json.dumps(seen.body.get("messages", []))))
    return {
        "id": f"msg_{uuid.uuid4().hex[:24]}",
        "type": "message",
        "role": "assistant",
        "model": reply.model or seen.body.get("model", "unknown"),
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "cache_creation_input_tokens": written,
            "cache_read_input_tokens": read,
        },
    }


def _chat_completion(seen: Seen, reply: Reply) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text, "refusal": None}
    finish = "stop"
    if reply.stop_reason == "refusal":
        message["content"], message["refusal"] = None, reply.text
    elif reply.tool_input is not None:
        finish = "tool_calls"
        message["tool_calls"] = [
            {
                "id": f"call_{uuid.uuid4().hex[:24]}",
                "type": "function",
                "function": {"name": _tool_name(seen), "arguments": json.dumps(reply.tool_input)},
            }
        ]
    if reply.stop_reason == "max_tokens":
        finish = "length"
    input_tokens, output_tokens = _usage(seen, reply)
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": reply.model or seen.body.get("model", "unknown"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": {
            "prompt_tokens": input_tokens,
            "completion_tokens": output_tokens,
            "total_tokens": input_tokens + output_tokens,
        },
    }


@pytest.fixture
def llm_server() -> Iterator[LLMServer]:
    """A started :class:`LLMServer` answering "ok" unless told otherwise."""
    with LLMServer() as server:
        yield server


def use_only(server: LLMServer, monkeypatch: Any) -> None:
    """A test's LLM is the loopback ``server`` alone: no key or setting from the environment."""
    for name in list(os.environ):
        if name.startswith(("ANTHROPIC_", "EVALLOOP_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
