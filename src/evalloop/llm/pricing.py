"""The price table (USD per million tokens), the published price rules, and the cost of one call.

The rules are the Anthropic API's: a prompt-cache write costs 1.25x the input price (5-minute
cache), a cache read 0.1x, and a request sent through a batch API half of everything. The same
rules price an OpenAI-compatible server's usage (local models cost 0 anyway).
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel

from evalloop.llm.types import TokenUsage

CACHE_WRITE = 1.25
"""A prompt-cache write, as a multiple of the input price (5-minute cache)."""
CACHE_READ = 0.1
"""A prompt-cache read, as a multiple of the input price."""
BATCH = 0.5
"""A request sent through a batch API, as a multiple of its live price."""


class Price(BaseModel):
    """USD per million input and output tokens."""

    input_per_mtok: float
    output_per_mtok: float


PRICES: dict[str, Price] = {
    "claude-haiku-4-5": Price(input_per_mtok=1.0, output_per_mtok=5.0),
    "claude-sonnet-4-5": Price(input_per_mtok=3.0, output_per_mtok=15.0),
    "claude-opus-4-1": Price(input_per_mtok=15.0, output_per_mtok=75.0),
}
"""Prices of current Claude models; unknown and local models cost 0."""

MIN_CACHEABLE: dict[str, int] = {
    "claude-haiku-4-5": 4096,
    "claude-sonnet-4-5": 1024,
    "claude-opus-4-1": 1024,
}
"""The published minimum cacheable prefix (tokens) per model; a shorter prefix is not cached."""
DEFAULT_MIN_CACHEABLE = 1024

PriceInput = Price | tuple[float, float] | Mapping[str, float]


def _as_price(value: PriceInput) -> Price:
    if isinstance(value, Price):
        return value
    if isinstance(value, tuple):
        return Price(input_per_mtok=value[0], output_per_mtok=value[1])
    return Price.model_validate(dict(value))


def price_table(overrides: Mapping[str, PriceInput] | None = None) -> dict[str, Price]:
    """The built-in table with ``overrides`` (model -> Price, ``(in, out)`` or a dict) applied."""
    table = dict(PRICES)
    for model, value in (overrides or {}).items():
        table[model] = _as_price(value)
    return table


def _longest_prefix(model: str, table: Mapping[str, object]) -> str | None:
    if model in table:
        return model
    matches = [name for name in table if model.startswith(name)]
    return max(matches, key=len) if matches else None


def price_for(model: str, table: Mapping[str, Price] | None = None) -> Price | None:
    """The price of ``model``: an exact entry, else the longest entry it starts with.

    A dated id such as ``claude-haiku-4-5-20251001`` is priced as ``claude-haiku-4-5``.
    """
    table = PRICES if table is None else table
    name = _longest_prefix(model, table)
    return table[name] if name is not None else None


def min_cacheable(model: str) -> int:
    """The minimum cacheable prefix of ``model`` in tokens (1024 for a model not in the table)."""
    name = _longest_prefix(model, MIN_CACHEABLE)
    return MIN_CACHEABLE[name] if name is not None else DEFAULT_MIN_CACHEABLE


def cost_usd(model: str, usage: TokenUsage, table: Mapping[str, Price] | None = None, *,
             batch: bool = False) -> float:
    """What ``usage`` on ``model`` costs in USD (0 for unknown models): input, cache writes and
    reads, and output at the published rules, halved for a ``batch`` request."""
    price = price_for(model, table)
    if price is None:
        return 0.0
    tokens_in = (usage.input_tokens + CACHE_WRITE * usage.cache_creation_input_tokens
                 + CACHE_READ * usage.cache_read_input_tokens)
    cost = (tokens_in * price.input_per_mtok + usage.output_tokens * price.output_per_mtok) / 1_000_000
    return cost * BATCH if batch else cost


def estimate_tokens(text: str) -> int:
    """A rough token count of ``text`` (4 characters a token), for budgets and notices."""
    return max(1, len(text) // 4) if text else 0
