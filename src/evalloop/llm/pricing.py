"""The price table (USD per million tokens) and the cost of one call."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel

from evalloop.llm.types import TokenUsage


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


def price_for(model: str, table: Mapping[str, Price] | None = None) -> Price | None:
    """The price of ``model``: an exact entry, else the longest entry it starts with.

    A dated id such as ``claude-haiku-4-5-20251001`` is priced as ``claude-haiku-4-5``.
    """
    table = PRICES if table is None else table
    if model in table:
        return table[model]
    matches = [name for name in table if model.startswith(name)]
    return table[max(matches, key=len)] if matches else None


def cost_usd(model: str, usage: TokenUsage, table: Mapping[str, Price] | None = None) -> float:
    """What ``usage`` on ``model`` costs in USD (0 for unknown models)."""
    price = price_for(model, table)
    if price is None:
        return 0.0
    return (usage.input_tokens * price.input_per_mtok + usage.output_tokens * price.output_per_mtok) / 1_000_000
