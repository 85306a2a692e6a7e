"""Prompt caching: the stable prefix is marked, cache writes and reads are counted and priced by
the published rules (write 1.25x, read 0.1x the input price), in a run's cost and ``--json``, and a
prefix below the model's minimum cacheable length is said once per run — on the real anthropic
SDK against the loopback Messages-API server."""

from __future__ import annotations

import os

import pytest

from evalloop import RunOptions
from evalloop.config import load_settings
from evalloop.llm import AnthropicClient, LLMRequest, Message, OpenAICompatClient, usage_scope
from evalloop.llm.pricing import cost_usd, min_cacheable
from evalloop.llm.types import TokenUsage
from evalloop.loop.pipeline import arun_suite
from evalloop.report.summary import run_summary
from evalloop.suites.models import Suite
from support.messages_server import LLMServer, Reply, Seen

LONG = "Grade with care. " * 1100   # ≈ 4,700 tokens by the server's count: above Haiku 4.5's 4,096
SHORT = "Grade with care."


def ask(system: str, text: str, **kw) -> LLMRequest:
    return LLMRequest(model="claude-haiku-4-5", system=system, messages=[Message(role="user", content=text)],
                      cache_prefix=True, **kw)


def test_published_price_rules():
    usage = TokenUsage(input_tokens=1_000_000, cache_creation_input_tokens=1_000_000,
                       cache_read_input_tokens=1_000_000, output_tokens=1_000_000)
    # Haiku 4.5: $1 in, $5 out; write 1.25x, read 0.1x the input price; a batch half of it all
    assert cost_usd("claude-haiku-4-5", usage) == pytest.approx(1 + 1.25 + 0.1 + 5)
    assert cost_usd("claude-haiku-4-5", usage, batch=True) == pytest.approx((1 + 1.25 + 0.1 + 5) / 2)
    assert min_cacheable("claude-haiku-4-5-20251001") == 4096 and min_cacheable("claude-sonnet-4-5") == 1024


async def test_a_prefix_seen_before_is_a_cache_read_priced_at_a_tenth():
    with LLMServer() as server:
        client = AnthropicClient(api_key="k", base_url=server.url)
        try:
            with usage_scope() as totals:
                first = await client.complete(ask(LONG, "case one"))
                second = await client.complete(ask(LONG, "case two"))
        finally:
            await client.aclose()
    sent = server.requests[0].body["system"]
    assert sent == [{"type": "text", "text": LONG, "cache_control": {"type": "ephemeral"}}]
    prefix = first.usage.cache_creation_input_tokens
    assert prefix > 4096 and first.usage.cache_read_input_tokens == 0
    assert second.usage.cache_read_input_tokens == prefix and second.usage.cache_creation_input_tokens == 0
    assert first.usage.input_tokens < 20  # only the case's message is plain input
    assert first.cost_usd == pytest.approx((first.usage.input_tokens + 1.25 * prefix
                                            + 5 * first.usage.output_tokens) / 1e6)
    assert second.cost_usd == pytest.approx((second.usage.input_tokens + 0.1 * prefix
                                             + 5 * second.usage.output_tokens) / 1e6)
    assert (totals.cache_write_tokens, totals.cache_read_tokens) == (prefix, prefix)
    assert first.uncached_prefix is None and second.uncached_prefix is None


async def test_a_short_prefix_is_not_cached_and_the_reply_says_why():
    with LLMServer() as server:
        client = AnthropicClient(api_key="k", base_url=server.url)
        try:
            reply = await client.complete(ask(SHORT, "x"))
            off = AnthropicClient(api_key="k", base_url=server.url, prompt_cache=False)
            plain = await off.complete(ask(LONG, "x"))
            await off.aclose()
        finally:
            await client.aclose()
    assert reply.usage.cache_creation_input_tokens == reply.usage.cache_read_input_tokens == 0
    assert "below the model's minimum cacheable length (4096 tokens)" in (reply.uncached_prefix or "")
    assert isinstance(server.requests[1].body["system"], str) and plain.uncached_prefix is None


async def test_openai_cached_tokens_are_reads_apart_from_the_input():
    def cached(seen: Seen) -> Reply:
        return Reply.of_text("ok", input_tokens=3000, output_tokens=10)

    with LLMServer(cached) as server:
        client = OpenAICompatClient(server.openai_url, "claude-haiku-4-5")
        try:
            reply = client._response(ask(LONG, "x"), {
                "choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 3000, "completion_tokens": 10,
                          "prompt_tokens_details": {"cached_tokens": 2048}}})
        finally:
            await client.aclose()
    assert (reply.usage.input_tokens, reply.usage.cache_read_input_tokens) == (952, 2048)


# -- a judge suite: the rubric is the cached prefix ------------------------------------------------
def judge_suite(rubric: str, n: int = 4) -> Suite:
    cases = [{"id": f"c{i}", "input": f"question {i}", "expected": f"answer {i}"} for i in range(n)]
    return Suite.model_validate({"name": "judged", "target": "sut:echo", "cases": cases,
                                 "scorers": [{"name": "llm-rubric", "params": {"rubric": rubric}}]})


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "sut.py").write_text("def echo(input):\n    return 'said ' + input\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in list(os.environ):
        if name.startswith(("ANTHROPIC_", "EVALLOOP_")):
            monkeypatch.delenv(name)
    return tmp_path


def grade(seen: Seen) -> Reply:
    assert "said question" in seen.last_user_text and "said question" not in seen.system_text
    return Reply.of_tool({"score": 80, "issues": [], "strengths": ["ok"]})


async def test_a_judge_run_counts_and_prices_cache_writes_and_reads(project, monkeypatch):
    with LLMServer(grade) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        report = await arun_suite(judge_suite(LONG), RunOptions(cache="off", concurrency=1),
                                  settings=load_settings(project))
        short = await arun_suite(judge_suite(SHORT), RunOptions(cache="off"), settings=load_settings(project))
    run = report.executed.run
    assert run.llm_calls == 4 and run.cache_write_tokens > 4096
    assert run.cache_read_tokens == 3 * run.cache_write_tokens  # one write, then three reads
    doc = run_summary(report).dump()
    assert doc["tokens"]["cache_write"] == run.cache_write_tokens
    assert doc["tokens"]["cache_read"] == run.cache_read_tokens
    uncached = (run.input_tokens + run.cache_write_tokens + run.cache_read_tokens + 5 * run.output_tokens) / 1e6
    expected = (run.input_tokens + 1.25 * run.cache_write_tokens + 0.1 * run.cache_read_tokens
                + 5 * run.output_tokens) / 1e6
    assert run.cost_usd == pytest.approx(expected) and run.cost_usd < 0.5 * uncached
    assert not any("prompt caching" in n for n in report.notices)
    said = [n for n in short.notices if "prompt caching" in n]
    assert len(said) == 1 and "minimum cacheable length (4096 tokens)" in said[0]
    assert short.executed.run.cache_write_tokens == 0
