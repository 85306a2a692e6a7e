"""Price table and per-case usage attribution through nested scopes and spawned tasks."""

from __future__ import annotations

import asyncio

import pytest

from evalloop.llm import (
    PRICES,
    AnthropicClient,
    LLMRequest,
    LLMResponse,
    Message,
    Price,
    TokenUsage,
    UsageTotals,
    cost_usd,
    price_for,
    price_table,
    record_usage,
    usage_scope,
)
from support.messages_server import Reply, Seen, llm_server  # noqa: F401


def test_price_lookup():
    assert price_for("claude-haiku-4-5") == Price(input_per_mtok=1.0, output_per_mtok=5.0)
    assert price_for("claude-haiku-4-5-20251001") == PRICES["claude-haiku-4-5"]
    assert price_for("claude-opus-4-1").output_per_mtok == 75.0
    assert price_for("llama3.1:8b") is None
    usage = TokenUsage(input_tokens=2_000_000, output_tokens=1_000_000)
    assert cost_usd("claude-sonnet-4-5", usage) == pytest.approx(6.0 + 15.0)
    assert cost_usd("llama3.1:8b", usage) == 0.0


def test_price_overrides():
    table = price_table({"llama3.1:8b": (0.1, 0.2), "claude-haiku-4-5": {"input_per_mtok": 2, "output_per_mtok": 8}})
    usage = TokenUsage(input_tokens=1_000_000, output_tokens=1_000_000)
    assert cost_usd("llama3.1:8b", usage, table) == pytest.approx(0.3)
    assert cost_usd("claude-haiku-4-5", usage, table) == pytest.approx(10.0)
    assert PRICES["claude-haiku-4-5"].input_per_mtok == 1.0  # the built-in table is untouched


def test_record_usage_outside_a_scope_is_a_no_op():
    response = LLMResponse(text="x", model="m", usage=TokenUsage(input_tokens=5), cost_usd=1.0)
    record_usage(response)
    with usage_scope() as totals:
        record_usage(response, retries=2)
        record_usage(response.model_copy(update={"cached": True}))
    assert totals == UsageTotals(calls=1, cache_hits=1, input_tokens=5, cost_usd=1.0, retries=2)


def tokens_by_case(seen: Seen) -> Reply:
    case = int(seen.last_user_text.split()[1])
    return Reply.of_text("ok", input_tokens=100 * (case + 1), output_tokens=10)


async def test_per_case_scopes_in_spawned_tasks(llm_server):  # noqa: F811
    llm_server.responder = tokens_by_case
    client = AnthropicClient(api_key="k", base_url=llm_server.url, concurrency=4)

    async def run_case(case: int) -> UsageTotals:
        with usage_scope() as totals:
            calls = [
                asyncio.create_task(
                    client.complete(
                        LLMRequest(
                            model="claude-haiku-4-5",
                            messages=[Message(role="user", content=f"case {case} call {n}")],
                        )
                    )
                )
                for n in range(case + 1)
            ]
            await asyncio.gather(*calls)
        return totals

    with usage_scope() as run_totals:
        per_case = await asyncio.gather(*(run_case(case) for case in range(4)))
    await client.aclose()

    for case, totals in enumerate(per_case):
        assert totals.calls == case + 1
        assert totals.input_tokens == (case + 1) * 100 * (case + 1)
        assert totals.output_tokens == 10 * (case + 1)
        expected = ((case + 1) * 100 * (case + 1) * 1.0 + 10 * (case + 1) * 5.0) / 1e6
        assert totals.cost_usd == pytest.approx(expected)
    assert run_totals.calls == sum(t.calls for t in per_case) == 10
    assert run_totals.input_tokens == sum(t.input_tokens for t in per_case)
    assert run_totals.cost_usd == pytest.approx(sum(t.cost_usd for t in per_case))
