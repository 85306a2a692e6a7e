"""Provider rate limits: how many LLM calls may start now, per provider, endpoint and key.

A provider limits requests and tokens per key, whichever suite, client or process spends them.
So every client of the process that talks to one provider endpoint with one key shares one
:class:`RateLimiter` (:func:`limiter_for`; the key is kept only as a hash), across suites and
event loops, and each attempt of a call (:func:`evalloop.llm.retry.call_with_retries`) starts
only when it admits it. What it learns:

* **a 429 (rate limited) or 529 (overloaded)**: the calls allowed in flight are halved — once
  for the calls sent before the cut, not once per reply of that burst — and with ``retry-after``
  no new call of any suite starts until it has passed. Each success adds ``1 / limit`` back
  (one call per round of calls), up to the client's ``concurrency``: additive increase,
  multiplicative decrease.
* **the rate-limit headers of any reply**: Anthropic's
  ``anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,remaining,reset}``
  (reset an RFC 3339 time) and OpenAI-compatible ``x-ratelimit-{limit,remaining,reset}-{requests,
  tokens}`` (reset a duration, ``6m0s``). Each is a bucket that refills at ``(limit − remaining) /
  reset`` per second; a call takes one request and, of tokens, what calls took on average. When
  a bucket cannot pay for the next call, new calls wait until it can, so a suite spends the
  budget at the rate the provider refills it instead of running into 429s.

:class:`RateState` is the rule, without clocks or event loops (held to a reference model by
``tests/test_llm_rate_limits.py``); :class:`RateLimiter` is its lock, its clock and its waiters.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import math
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

__all__ = ["MAX_WAIT", "THROTTLED", "Bucket", "RateLimiter", "RateState", "limiter_for", "rate_headers"]

THROTTLED = frozenset({429, 529})  #: statuses that say: send less
KINDS = ("requests", "tokens", "input-tokens", "output-tokens")
MAX_WAIT = 60.0  #: seconds a call waits at most on one look (a header far off cannot stall a run)
_DEFAULT_PERIOD = 60.0  # a bucket's refill period when its headers do not tell (per minute)
_MEAN_WEIGHT = 0.2      # weight of a call's tokens in the running mean


@dataclass
class Bucket:
    """One of the provider's budgets: ``level`` at monotonic time ``at``, refilled at ``rate`` a
    second up to ``limit``."""

    limit: float
    level: float
    rate: float
    at: float

    def now(self, now: float) -> float:
        return min(self.limit, self.level + self.rate * max(0.0, now - self.at))

    def take(self, amount: float, now: float) -> None:
        self.level, self.at = self.now(now) - amount, now

    def wait(self, amount: float, now: float) -> float:
        """Seconds until the bucket holds ``amount`` (0: now)."""
        short = amount - self.now(now)
        if short <= 0:
            return 0.0
        return short / self.rate if self.rate > 0 else MAX_WAIT


class RateState:
    """The limiter's rule (see the module docstring); times are monotonic seconds, passed in."""

    def __init__(self, ceiling: int) -> None:
        self.ceiling = max(1, ceiling)
        self.limit = float(self.ceiling)  # calls allowed in flight
        self.in_flight = 0
        self.hold_until = 0.0
        self.cut_at = -math.inf           # when the limit was last halved
        self.budgets: dict[str, Bucket] = {}
        self.mean: dict[str, float] = {}  # tokens a call takes, by kind
        self.throttled = 0                # 429/529 replies seen

    def cost(self, kind: str) -> float:
        return 1.0 if kind == "requests" else self.mean.get(kind, 0.0)

    def admit(self, now: float) -> float | None:
        """0.0: the call starts now (and is counted); seconds to wait first; None: wait until a
        call in flight ends."""
        if now < self.hold_until:
            return min(self.hold_until - now, MAX_WAIT)
        wait = max((b.wait(self.cost(kind), now) for kind, b in self.budgets.items()), default=0.0)
        if wait > 0:
            return min(wait, MAX_WAIT)
        if self.in_flight >= int(self.limit):
            return None
        self.in_flight += 1
        for kind, bucket in self.budgets.items():
            bucket.take(self.cost(kind), now)
        return 0.0

    def heard(self, now: float, reported: Mapping[str, tuple[float, float, float | None]]) -> None:
        """A reply's rate-limit headers: ``kind → (limit, remaining, seconds to full)``, said while
        its call is still in flight (the others in flight are taken as not counted yet)."""
        for kind, (limit, remaining, reset) in reported.items():
            old = self.budgets.get(kind)
            if remaining < limit and reset is not None and reset > 0:
                rate = (limit - remaining) / reset
            else:
                rate = old.rate if old is not None else limit / _DEFAULT_PERIOD
            others = max(0, self.in_flight - 1) * self.cost(kind)
            self.budgets[kind] = Bucket(limit, remaining - others, rate, now)

    def ended(self, now: float, started: float, status: int | None = None, retry_after: float | None = None,
              tokens: Mapping[str, int] | None = None) -> None:
        """A call that started at ``started`` ended: ``status`` its failing HTTP status (None: it
        succeeded, or failed otherwise), ``tokens`` what a success used by kind."""
        self.in_flight = max(0, self.in_flight - 1)
        if status in THROTTLED:
            self.throttled += 1
            if started >= self.cut_at:  # the first throttled reply to a call sent at the old limit
                self.limit, self.cut_at = max(1.0, self.limit / 2), now
            if retry_after is not None:
                self.hold_until = max(self.hold_until, now + min(retry_after, MAX_WAIT))
        elif tokens is not None:
            self.limit = min(float(self.ceiling), self.limit + 1 / self.limit)
            for kind, used in tokens.items():
                seen = self.mean.get(kind)
                self.mean[kind] = used if seen is None else seen + _MEAN_WEIGHT * (used - seen)

    def free(self) -> int:
        return max(0, int(self.limit) - self.in_flight)


class RateLimiter:
    """A :class:`RateState` for one provider, endpoint and key, usable from any event loop or thread."""

    def __init__(self, name: str, ceiling: int) -> None:
        self.name = name
        self.state = RateState(ceiling)
        self._lock = threading.Lock()
        self._waiting: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    async def acquire(self) -> float:
        """Wait until a call may start; its start time (monotonic), for :meth:`release`."""
        while True:
            with self._lock:
                now = time.monotonic()
                wait = self.state.admit(now)
                if wait == 0.0:
                    return now
                if wait is None:
                    loop = asyncio.get_running_loop()
                    woken: asyncio.Future[None] = loop.create_future()
                    self._waiting.append((loop, woken))
            if wait is None:
                try:
                    await woken
                except asyncio.CancelledError:
                    with self._lock:
                        if (loop, woken) in self._waiting:
                            self._waiting.remove((loop, woken))
                    raise
            else:
                await asyncio.sleep(wait)

    def release(self, started: float, status: int | None = None, retry_after: float | None = None,
                tokens: Mapping[str, int] | None = None) -> None:
        """A call admitted at ``started`` ended (see :meth:`RateState.ended`); wake who may start."""
        with self._lock:
            self.state.ended(time.monotonic(), started, status, retry_after, tokens)
            count = max(1, self.state.free())
            woken, self._waiting = self._waiting[:count], self._waiting[count:]
        for loop, future in woken:
            with contextlib.suppress(RuntimeError):  # its loop is closed: nobody waits there any more
                loop.call_soon_threadsafe(_wake, future)

    def observe(self, headers: Mapping[str, str]) -> None:
        """A reply's headers (success or error): its rate-limit budgets, if it sent any."""
        reported = rate_headers(headers)
        if reported:
            with self._lock:
                self.state.heard(time.monotonic(), reported)


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


_LIMITERS: dict[str, RateLimiter] = {}
_REGISTRY = threading.Lock()


def limiter_for(provider: str, endpoint: str, api_key: str | None, ceiling: int) -> RateLimiter:
    """The process's limiter of ``provider`` at ``endpoint`` with ``api_key`` (made on first use;
    its ceiling the largest ``concurrency`` of the clients that share it)."""
    key = hashlib.sha256((api_key or "").encode()).hexdigest()[:16]
    name = f"{provider} {endpoint} key:{key}"
    with _REGISTRY:
        limiter = _LIMITERS.get(name)
        if limiter is None:
            limiter = _LIMITERS[name] = RateLimiter(name, ceiling)
        elif ceiling > limiter.state.ceiling:
            with limiter._lock:
                limiter.state.ceiling = ceiling
        return limiter


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def _seconds(value: str | None, *, wall: float) -> float | None:
    """Seconds from now of a reset header: an RFC 3339 time (Anthropic), a duration such as
    ``6m0s`` or ``20ms`` (OpenAI), or plain seconds."""
    if not value:
        return None
    value = value.strip()
    with contextlib.suppress(ValueError):
        return max(0.0, float(value))
    parts = _DURATION.findall(value)
    if parts and "".join(n + u for n, u in parts) == value:
        return sum(float(n) * _UNITS[u] for n, u in parts)
    with contextlib.suppress(ValueError):
        return max(0.0, datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() - wall)
    return None


def rate_headers(headers: Mapping[str, Any]) -> dict[str, tuple[float, float, float | None]]:
    """``kind → (limit, remaining, seconds until full)`` of the rate-limit headers of a reply, in
    either provider's spelling; kinds without a limit and a remaining count are left out."""
    found: dict[str, tuple[float, float, float | None]] = {}
    # one pass over the names (a reply without such headers, a local server's, costs ≈ 1 µs)
    headers = {name.lower(): value for name, value in headers.items()
               if name[:2] in ("x-", "X-", "an", "An", "AN") and "ratelimit" in name.lower()}
    if not headers:
        return found
    wall = time.time()
    for kind in KINDS:
        names = (f"anthropic-ratelimit-{kind}-limit", f"anthropic-ratelimit-{kind}-remaining",
                 f"anthropic-ratelimit-{kind}-reset")
        if headers.get(names[1]) is None and kind in ("requests", "tokens"):
            names = (f"x-ratelimit-limit-{kind}", f"x-ratelimit-remaining-{kind}", f"x-ratelimit-reset-{kind}")
        limit, remaining = headers.get(names[0]), headers.get(names[1])
        if limit is None or remaining is None:
            continue
        try:
            found[kind] = (float(limit), float(remaining), _seconds(headers.get(names[2]), wall=wall))
        except ValueError:
            continue
    return found
