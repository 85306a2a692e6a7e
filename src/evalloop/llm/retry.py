"""The one retry policy of both clients: backoff with jitter, ``retry-after``, per-call timeout."""

from __future__ import annotations

import asyncio
import email.utils
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Literal, TypeVar

from pydantic import BaseModel
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential_jitter,
)

from evalloop.llm.errors import LLMCallFailed, LLMConnectionFailed
from evalloop.llm.ratelimit import RateLimiter
from evalloop.llm.types import LLMResponse
from evalloop.llm.usage import record_usage

T = TypeVar("T")

RETRYABLE_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 529})


class RetryPolicy(BaseModel):
    """How often and how long to retry, and how long one attempt may take.

    The wait before retry *n* is ``retry-after`` when the server sent one (capped at
    ``max_retry_after``), else ``backoff_base * 2**n`` plus up to ``backoff_base`` of jitter,
    capped at ``backoff_max``.
    """

    max_retries: int = 4
    timeout: float = 60.0
    backoff_base: float = 0.5
    backoff_max: float = 30.0
    max_retry_after: float = 60.0


class TransientError(Exception):
    """One failed attempt that may succeed if retried."""

    def __init__(
        self,
        kind: Literal["status", "timeout", "connection"],
        message: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.status = status
        self.retry_after = retry_after


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date)."""
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return max(float(ms) / 1000.0, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)


def _wait(policy: RetryPolicy) -> Callable[[RetryCallState], float]:
    backoff = wait_exponential_jitter(
        multiplier=policy.backoff_base,
        exp_base=2,
        max=policy.backoff_max,
        jitter=policy.backoff_base,
    )

    def wait(state: RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome else None
        if isinstance(error, TransientError) and error.retry_after is not None:
            return min(error.retry_after, policy.max_retry_after)
        return backoff(state)

    return wait


async def call_with_retries(
    attempt: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    *,
    semaphore: asyncio.Semaphore | None = None,
    limiter: RateLimiter | None = None,
    where: str,
    url_setting: str = "the base URL",
) -> tuple[T, int]:
    """Run ``attempt`` until it succeeds; return its value and the number of retries.

    Each attempt holds ``semaphore`` (not while waiting to retry), starts when the provider's
    ``limiter`` admits it (:mod:`evalloop.llm.ratelimit`: told how it ended) and is cut off after
    ``policy.timeout`` seconds. :class:`TransientError` is retried; once retries are exhausted a
    connection failure raises :class:`LLMConnectionFailed` (its hint names ``url_setting``),
    anything else :class:`LLMCallFailed`.
    """

    async def limited() -> T:
        if limiter is None:
            return await _timed(attempt, policy.timeout)
        started = await limiter.acquire()
        try:
            value = await _timed(attempt, policy.timeout)
        except TransientError as error:
            limiter.release(started, error.status, error.retry_after)
            raise
        except BaseException:
            limiter.release(started)
            raise
        limiter.release(started, tokens=_tokens(value))
        return value

    async def one() -> T:
        if semaphore is None:
            return await limited()
        async with semaphore:
            return await limited()

    try:  # most calls succeed at once: the retry machinery (≈ 65 µs a call) only runs after a failure
        return await one(), 0
    except TransientError as error:
        failed: TransientError | None = error

    async def again() -> T:
        """The first failure once more (so tenacity waits and counts as if it had run it), then attempts."""
        nonlocal failed
        if failed is not None:
            error, failed = failed, None
            raise error
        return await one()

    retries = 0
    try:
        async for trial in AsyncRetrying(
            stop=stop_after_attempt(policy.max_retries + 1),
            wait=_wait(policy),
            retry=retry_if_exception_type(TransientError),
            reraise=True,
        ):
            retries = trial.retry_state.attempt_number - 1
            with trial:
                value = await again()
    except TransientError as error:
        raise _exhausted(error, where, retries + 1, url_setting) from error
    return value, retries


def _tokens(value: object) -> dict[str, int]:
    """What a reply's call took of a provider's token budgets (none for another value)."""
    usage = getattr(value, "usage", None)
    if usage is None:
        return {}
    taken = usage.input_tokens + usage.cache_creation_input_tokens  # cache reads: not in the input rate
    return {"tokens": taken + usage.output_tokens, "input-tokens": taken, "output-tokens": usage.output_tokens}


async def send(
    attempt: Callable[[], Awaitable[LLMResponse]], policy: RetryPolicy, *, semaphore: asyncio.Semaphore,
    where: str, url_setting: str, limiter: RateLimiter | None = None,
) -> LLMResponse:
    """One request of a client: retried by ``policy``, its retries counted and its usage recorded."""
    response, retries = await call_with_retries(attempt, policy, semaphore=semaphore, limiter=limiter,
                                                where=where, url_setting=url_setting)
    response.retries = retries
    record_usage(response, retries)
    return response


async def _timed(attempt: Callable[[], Awaitable[T]], timeout: float) -> T:
    try:
        async with asyncio.timeout(timeout):
            return await attempt()
    except TimeoutError as error:
        raise TransientError("timeout", f"no reply within {timeout:g} s") from error


def _exhausted(error: TransientError, where: str, attempts: int, url_setting: str) -> Exception:
    tries = f"after {attempts} attempt{'s' if attempts != 1 else ''}"
    if error.kind == "connection":
        return LLMConnectionFailed(
            f"cannot reach the LLM server ({error.message}) {tries}",
            where=where,
            hint=f"start the server, or fix {url_setting}",
        )
    if error.kind == "timeout":
        return LLMCallFailed(
            f"{error.message} {tries}",
            where=where,
            hint="raise the LLM timeout or lower the concurrency",
        )
    return LLMCallFailed(
        f"{error.message} {tries}",
        status=error.status,
        where=where,
        hint="the service is busy or failing; retry later or lower the concurrency",
    )
