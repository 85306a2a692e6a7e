"""A provider's rate limit on the loopback LLM server: a request quota that refills, 429s past it,
and the rate-limit headers of both APIs on every reply.

``Quota(limit, period)`` is a token bucket of ``limit`` requests refilled over ``period``
seconds, as the providers describe theirs. Used as the server's responder (around another one),
it answers a request the bucket can pay for with the inner reply, and one it cannot with a 429
and ``retry-after`` (the seconds until one request has refilled); every reply carries the
bucket's ``limit``, ``remaining`` and ``reset`` (when it will be full) in the spelling of the API
asked: ``anthropic-ratelimit-requests-*`` (reset an RFC 3339 time) on ``/v1/messages``,
``x-ratelimit-*-requests`` (reset a duration) on ``/v1/chat/completions``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime

from .messages_server import Reply, Seen


class Quota:
    """A request bucket in front of ``inner`` (see the module docstring)."""

    def __init__(self, limit: int, period: float, inner: Callable[[Seen], Reply] | None = None) -> None:
        self.limit, self.period = limit, period
        self.rate = limit / period
        self.inner = inner or (lambda seen: Reply.of_text("ok"))
        self.level, self.at = float(limit), time.monotonic()
        self.rejected = 0
        self._lock = threading.Lock()

    def __call__(self, seen: Seen) -> Reply:
        with self._lock:
            now = time.monotonic()
            self.level = min(self.limit, self.level + self.rate * (now - self.at))
            self.at = now
            allowed = self.level >= 1
            if allowed:
                self.level -= 1
            else:
                self.rejected += 1
            headers = self.headers(seen.path == "/v1/chat/completions", retry=None if allowed else
                                   (1 - self.level) / self.rate)
        reply = self.inner(seen) if allowed else Reply.rate_limited()
        return replace(reply, headers={**reply.headers, **headers})

    def headers(self, openai: bool, retry: float | None) -> dict[str, str]:
        remaining = int(self.level)
        to_full = (self.limit - self.level) / self.rate
        out = {"retry-after": f"{retry:.3f}"} if retry is not None else {}
        if openai:
            return {**out, "x-ratelimit-limit-requests": str(self.limit),
                    "x-ratelimit-remaining-requests": str(remaining),
                    "x-ratelimit-reset-requests": f"{to_full * 1000:.0f}ms"}
        full = datetime.fromtimestamp(time.time() + to_full, tz=UTC)
        return {**out, "anthropic-ratelimit-requests-limit": str(self.limit),
                "anthropic-ratelimit-requests-remaining": str(remaining),
                "anthropic-ratelimit-requests-reset": full.isoformat().replace("+00:00", "Z")}
