"""Token and cost accounting per scope (a run, a case) through a ContextVar.

A scope is a plain slots dataclass pushed onto a ContextVar: the runner opens one per case, so
opening and closing one must cost next to nothing (:func:`open_scope` / :func:`close_scope`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evalloop.llm.types import LLMResponse

RUN_TOTALS: dict[str, Any] = {"cost_usd": 0.0, "input_tokens": 0, "output_tokens": 0, "llm_calls": 0,
                               "cache_hits": 0, "llm_retries": 0, "cache_write_tokens": 0, "cache_read_tokens": 0,
                               "batched_calls": 0}
"""A run's LLM totals at zero, by the run's column names (see :meth:`UsageTotals.move_to`)."""

_SCOPES: ContextVar[tuple[UsageTotals, ...]] = ContextVar("evalloop_llm_usage", default=())


@dataclass(slots=True)
class UsageTotals:
    """What the calls made inside one scope used.

    ``calls`` counts calls answered by an API (cache hits are counted in ``cache_hits`` only and
    add no tokens or cost); ``retries`` counts transport retries. ``cache_write_tokens`` and
    ``cache_read_tokens`` are prompt-caching tokens (apart from ``input_tokens``); ``batched``
    counts calls answered through a batch API; ``note`` keeps the first reply's word that its
    prefix was not cached (:attr:`LLMResponse.uncached_prefix`).
    """

    calls: int = 0
    cache_hits: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    retries: int = 0
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0
    batched: int = 0
    note: str | None = None

    def add(self, response: LLMResponse, retries: int = 0) -> None:
        """Count one response."""
        self.retries += retries
        if response.cached:
            self.cache_hits += 1
            return
        self.calls += 1
        usage = response.usage
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        self.cache_write_tokens += usage.cache_creation_input_tokens
        self.cache_read_tokens += usage.cache_read_input_tokens
        self.batched += response.batched
        self.cost_usd += response.cost_usd
        if response.uncached_prefix and self.note is None:
            self.note = response.uncached_prefix

    def move_to(self, totals: dict[str, Any]) -> None:
        """Add these counts to a run's ``totals`` (the keys of :data:`RUN_TOTALS`, the run's
        columns), and start counting again from zero."""
        totals["cost_usd"] += self.cost_usd
        totals["input_tokens"] += self.input_tokens
        totals["output_tokens"] += self.output_tokens
        totals["llm_calls"] += self.calls
        totals["cache_hits"] += self.cache_hits
        totals["llm_retries"] += self.retries
        totals["cache_write_tokens"] += self.cache_write_tokens
        totals["cache_read_tokens"] += self.cache_read_tokens
        totals["batched_calls"] += self.batched
        self.clear()

    def clear(self) -> None:
        """Start counting again from zero (the runner reads a worker's scope case by case)."""
        self.calls = self.cache_hits = self.input_tokens = self.output_tokens = self.retries = 0
        self.cache_write_tokens = self.cache_read_tokens = self.batched = 0
        self.cost_usd = 0.0
        self.note = None


def open_scope() -> tuple[UsageTotals, Token[tuple[UsageTotals, ...]]]:
    """Open a scope without a ``with`` block: its totals, and the token :func:`close_scope` takes."""
    totals = UsageTotals()
    return totals, _SCOPES.set((*_SCOPES.get(), totals))


def close_scope(token: Token[tuple[UsageTotals, ...]]) -> None:
    """Close the scope :func:`open_scope` opened (in the same context)."""
    _SCOPES.reset(token)


@contextmanager
def usage_scope() -> Iterator[UsageTotals]:
    """Collect usage of every call made inside, including in tasks spawned inside.

    Scopes nest: a call adds to every enclosing scope.
    """
    totals, token = open_scope()
    try:
        yield totals
    finally:
        close_scope(token)


def record_usage(response: LLMResponse, retries: int = 0) -> None:
    """Add one response to every open scope (clients call this; nothing to do outside a scope)."""
    for totals in _SCOPES.get():
        totals.add(response, retries)
