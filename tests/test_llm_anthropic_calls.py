"""How AnthropicClient makes its calls: event loops, kept-alive connections, the reply read raw,
the retry fast path and the SDK's tracing option — real anthropic SDK against the loopback server."""

from __future__ import annotations

import asyncio

import pytest

from evalloop.llm import AnthropicClient, LLMRequest, Message, ToolSpec, usage_scope
from evalloop.llm.errors import MalformedReply
from support.messages_server import LLMServer, Reply, llm_server  # noqa: F401

KW = {"api_key": "test-key", "backoff_base": 0.001, "timeout": 10.0}


def ask(text: str = "hello", **kw) -> LLMRequest:
    return LLMRequest(model="claude-haiku-4-5", messages=[Message(role="user", content=text)], **kw)


def test_one_client_serves_successive_event_loops(llm_server):  # noqa: F811
    """Each ``asyncio.run`` gets its own SDK client and semaphore: connections made in a loop that
    has ended are never reused (they raised "Event loop is closed" before)."""
    client = AnthropicClient(**KW, base_url=llm_server.url, max_retries=0)
    texts = [asyncio.run(client.complete(ask(str(i)))).text for i in range(3)]

    async def close_after_one() -> str:
        try:
            return (await client.complete(ask("last"))).text
        finally:
            await client.aclose()

    assert texts == ["ok", "ok", "ok"] and asyncio.run(close_after_one()) == "ok"
    assert llm_server.count == 4


async def test_connections_are_kept_alive_up_to_the_concurrency():
    """120 calls at once (above the HTTP libraries' default pools of 100) run together, and the
    next rounds reuse the same connections instead of opening new ones."""
    concurrency = 120
    with LLMServer(latency=0.2) as server:
        client = AnthropicClient(**KW, base_url=server.url, concurrency=concurrency)
        try:
            for _ in range(3):
                await asyncio.gather(*(client.complete(ask(str(i))) for i in range(concurrency)))
        finally:
            await client.aclose()
    assert server.count == 3 * concurrency and server.max_active == concurrency
    connections = {seen.peer for seen in server.requests}
    assert len(connections) <= concurrency, f"{len(connections)} connections for {concurrency} calls at once"


async def test_a_reply_is_read_from_its_body(llm_server):  # noqa: F811
    """Text blocks are joined, blocks of other kinds are skipped, the forced tool's input is taken
    and a call of another tool is not; usage and cost come from the body."""
    body = (b'{"id": "msg_x", "type": "message", "role": "assistant", "model": "claude-haiku-4-5", '
            b'"content": [{"type": "thinking", "thinking": "hmm", "signature": "s"}, '
            b'{"type": "text", "text": "a"}, {"type": "tool_use", "id": "t1", "name": "other", "input": {"x": 1}}, '
            b'{"type": "text", "text": "b"}, {"type": "tool_use", "id": "t2", "name": "record", "input": {"y": 2}}], '
            b'"stop_reason": "tool_use", "usage": {"input_tokens": 1000000, "output_tokens": 0}}')
    llm_server.script(Reply(raw_body=body))
    tool = ToolSpec(name="record", description="record it", input_schema={"type": "object"})
    client = AnthropicClient(**KW, base_url=llm_server.url)
    with usage_scope() as totals:
        response = await client.complete(ask(tool=tool))
    await client.aclose()
    assert (response.text, response.tool_input, response.stop_reason, response.id) == ("ab", {"y": 2}, "tool_use",
                                                                                       "msg_x")
    assert response.cost_usd == pytest.approx(1.0) and totals.input_tokens == 1_000_000 and totals.calls == 1


@pytest.mark.parametrize(("body", "why"), [
    (b'{"content": [], "usage": {"input_tokens": "12", "output_tokens": 3}}', "the message has no token usage"),
    (b'{"content": [{"text": "hi"}], "usage": {"input_tokens": 1, "output_tokens": 1}}',
     "a content block without a type"),
    (b'{"content": [{"type": "tool_use", "input": {}}], "usage": {"input_tokens": 1, "output_tokens": 1}}',
     "a tool_use block without a name"),
    (b'{"content": [], "usage": {"input_tokens": 1, "output_tokens": 1}, "stop_reason": 7}',
     "stop_reason: Input should be a valid string"),
])
async def test_a_body_of_the_wrong_shape_is_named_in_one_line(llm_server, body, why):  # noqa: F811
    llm_server.script(Reply(raw_body=body))
    client = AnthropicClient(**KW, base_url=llm_server.url)
    with pytest.raises(MalformedReply) as caught:
        await client.complete(ask())
    await client.aclose()
    assert f"not a Messages-API reply: {why}" in str(caught.value) and "\n" not in caught.value.one_line()
    assert llm_server.count == 1


@pytest.mark.parametrize("max_retries", [0, 1, 3])
async def test_retries_after_a_first_failure_follow_the_policy(llm_server, max_retries):  # noqa: F811
    """The first attempt runs outside the retry machinery; a failure of it still counts as attempt one."""
    llm_server.script(*[Reply.rate_limited(retry_after=0)] * 2, Reply.of_text("fine"))
    client = AnthropicClient(**KW, base_url=llm_server.url, max_retries=max_retries)
    try:
        if max_retries < 2:
            with pytest.raises(Exception, match=f"after {max_retries + 1} attempt"):
                await client.complete(ask())
        else:
            with usage_scope() as totals:
                response = await client.complete(ask())
            assert response.retries == 2 and totals.retries == 2
    finally:
        await client.aclose()
    assert llm_server.count == min(max_retries + 1, 3)


async def test_sdk_spans_only_when_they_can_go_somewhere(llm_server, monkeypatch):  # noqa: F811
    """No tracer provider set and no ANTHROPIC_OPEN_TELEMETRY* variable: the SDK builds no spans;
    with such a variable the SDK's own option applies."""
    for name in [n for n in __import__("os").environ if n.startswith("ANTHROPIC_OPEN_TELEMETRY")]:
        monkeypatch.delenv(name)
    quiet = AnthropicClient(**KW, base_url=llm_server.url)
    assert quiet._bind().sdk.open_telemetry["traces"]["enabled"] is False
    monkeypatch.setenv("ANTHROPIC_OPEN_TELEMETRY_TRACES_CONTENT_MODE", "content")
    traced = AnthropicClient(**KW, base_url=llm_server.url)
    options = traced._bind().sdk.open_telemetry
    assert options["traces"]["enabled"] is True and options["traces"]["content_mode"] == "content"
    assert (await traced.complete(ask())).text == "ok"
    await quiet.aclose()
    await traced.aclose()


def test_async_with_closes_the_clients_connections(llm_server, tmp_path):  # noqa: F811
    """``async with`` closes what ``aclose`` closes, for the Anthropic client and the cache over it."""
    from evalloop.llm.cache import CachedClient

    async def use() -> tuple[str, object, object]:
        inner = AnthropicClient(**KW, base_url=llm_server.url, max_retries=0)
        async with CachedClient(inner, tmp_path / "cache.db", mode="use") as client:
            text = (await client.complete(ask("hi"))).text
            sdk = inner._bound.sdk
        return text, sdk, inner._bound

    text, sdk, bound = asyncio.run(use())
    assert text and bound is None and sdk.is_closed()
