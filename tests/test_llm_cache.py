"""The SQLite response cache: hits, misses, replay, no-cache, and zero API calls on a rerun."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import BaseModel

from evalloop.errors import ReplayMiss
from evalloop.llm import (
    AnthropicClient,
    CachedClient,
    LLMCallFailed,
    LLMRequest,
    Message,
    ToolSpec,
    cache_key,
    structured,
    usage_scope,
)
from support.messages_server import LLMServer, Reply, Seen, llm_server  # noqa: F401
from support.sqlitedb import sqlite_conn


class Grade(BaseModel):
    score: int


def grade_by_prompt(seen: Seen) -> Reply:
    """Score = length of the prompt, so every case has its own answer."""
    return Reply.of_tool({"score": len(seen.last_user_text)}, input_tokens=1000, output_tokens=100)


@pytest.fixture
async def inner(llm_server):  # noqa: F811
    llm_server.responder = grade_by_prompt
    client = AnthropicClient(api_key="k", base_url=llm_server.url, backoff_base=0.001)
    yield client
    await client.aclose()


def ask(text: str = "hi", **kw) -> LLMRequest:
    return LLMRequest(model="claude-haiku-4-5", messages=[Message(role="user", content=text)], **kw)


async def run_suite(client) -> list[int]:
    prompts = [f"case {i}: " + "x" * i for i in range(6)]
    grades = await asyncio.gather(*(structured(client, Grade, prompt=p) for p in prompts))
    return [g.score for g in grades]


async def test_second_identical_run_makes_zero_api_calls(llm_server, inner, tmp_path):  # noqa: F811
    path = tmp_path / "llm-cache.sqlite"
    with usage_scope() as first_run:
        first = await run_suite(CachedClient(inner, path))
    assert llm_server.count == 6
    assert (first_run.calls, first_run.cache_hits) == (6, 0)
    assert first_run.cost_usd == pytest.approx(6 * (1000 * 1 + 100 * 5) / 1e6)

    with usage_scope() as second_run:
        second = await run_suite(CachedClient(inner, path))  # a new run, same file
    assert second == first
    assert llm_server.count == 6  # not one request more
    assert (second_run.calls, second_run.cache_hits, second_run.cost_usd) == (0, 6, 0.0)
    assert second_run.input_tokens == 0


async def test_hit_is_marked_cached(llm_server, inner, tmp_path):  # noqa: F811
    client = CachedClient(inner, tmp_path / "c.sqlite")
    fresh = await client.complete(ask())
    again = await client.complete(ask())
    assert not fresh.cached and again.cached
    assert again.text == fresh.text and again.id == fresh.id and again.cost_usd == 0.0
    assert llm_server.count == 1


@pytest.mark.parametrize(
    "change",
    [
        {"model": "claude-opus-4-1"},
        {"system": "be harsh"},
        {"messages": [Message(role="user", content="other")]},
        {"temperature": 0.7},
        {"max_tokens": 99},
        {"tool": ToolSpec(name="t", description="d", input_schema={"type": "object"})},
    ],
)
async def test_any_field_change_is_a_miss(llm_server, inner, tmp_path, change):  # noqa: F811
    client = CachedClient(inner, tmp_path / "c.sqlite")
    base = ask()
    await client.complete(base)
    await client.complete(base.model_copy(update=change))
    assert llm_server.count == 2
    assert cache_key(base) != cache_key(base.model_copy(update=change))


async def test_epoch_is_part_of_the_key(llm_server, inner, tmp_path):  # noqa: F811
    path = tmp_path / "c.sqlite"
    await CachedClient(inner, path, epoch=0).complete(ask())
    await CachedClient(inner, path, epoch=1).complete(ask())
    await CachedClient(inner, path, epoch=1).complete(ask())
    assert llm_server.count == 2
    assert cache_key(ask()) == cache_key(ask()) != cache_key(ask(), epoch=1)


async def test_off_neither_reads_nor_writes(llm_server, inner, tmp_path):  # noqa: F811
    path = tmp_path / "c.sqlite"
    await CachedClient(inner, path).complete(ask())
    off = CachedClient(inner, path, mode="off")
    response = await off.complete(ask())
    await off.complete(ask("new"))
    assert not response.cached
    assert llm_server.count == 3
    assert len(off.cache) == 1


async def test_only_replays_and_a_miss_names_the_request(llm_server, inner, tmp_path):  # noqa: F811
    path = tmp_path / "c.sqlite"
    await CachedClient(inner, path).complete(ask("recorded prompt"))
    replay = CachedClient(inner, path, mode="only")
    assert (await replay.complete(ask("recorded prompt"))).cached
    with pytest.raises(ReplayMiss) as caught:
        await replay.complete(ask("never asked before"))
    line = str(caught.value)
    assert "claude-haiku-4-5" in line and "never asked before" in line
    assert str(path) in line and "--cache-only" in line
    assert llm_server.count == 1


async def test_concurrent_identical_requests_share_one_call(tmp_path):
    with LLMServer(latency=0.1) as server:
        inner = AnthropicClient(api_key="k", base_url=server.url)
        client = CachedClient(inner, tmp_path / "c.sqlite")
        with usage_scope() as totals:
            replies = await asyncio.gather(*(client.complete(ask()) for _ in range(10)))
        await inner.aclose()
    assert server.count == 1
    assert sum(not r.cached for r in replies) == 1
    assert (totals.calls, totals.cache_hits) == (1, 9)


async def test_errors_are_not_cached(llm_server, inner, tmp_path):  # noqa: F811
    client = CachedClient(inner, tmp_path / "c.sqlite")
    llm_server.script(Reply.error(400, "invalid_request_error", "bad"))
    with pytest.raises(LLMCallFailed):
        await client.complete(ask())
    await client.complete(ask())
    assert llm_server.count == 2 and len(client.cache) == 1


async def test_file_is_wal_and_survives_many_concurrent_writers(llm_server, inner, tmp_path):  # noqa: F811
    path = tmp_path / "c.sqlite"
    clients = [CachedClient(inner, path) for _ in range(3)]
    await asyncio.gather(*(clients[i % 3].complete(ask(f"q{i}")) for i in range(60)))
    with sqlite_conn(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert db.execute("SELECT count(*) FROM responses").fetchone()[0] == 60
    assert llm_server.count == 60


def test_unknown_mode_is_refused(tmp_path):
    with pytest.raises(ValueError, match="cache mode"):
        CachedClient(None, tmp_path / "c.sqlite", mode="sometimes")  # type: ignore[arg-type]
