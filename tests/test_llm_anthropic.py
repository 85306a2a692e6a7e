"""AnthropicClient against the loopback Messages-API server, through the real anthropic SDK."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest

from evalloop.errors import ConfigError, ConnectionFailed, EvalloopError
from evalloop.llm import (
    AnthropicClient,
    LLMCallFailed,
    LLMConnectionFailed,
    LLMError,
    LLMRequest,
    Message,
    ToolSpec,
    client_from_env,
    usage_scope,
)
from support.messages_server import LLMServer, Reply, llm_server  # noqa: F401

KW = {"api_key": "test-key", "backoff_base": 0.001, "timeout": 5.0}


@pytest.fixture
async def make_client(llm_server):  # noqa: F811
    clients: list[AnthropicClient] = []

    def make(**options) -> AnthropicClient:
        client = AnthropicClient(**{**KW, "base_url": llm_server.url, **options})
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.aclose()


def ask(text: str = "hello", **kw) -> LLMRequest:
    return LLMRequest(model="claude-haiku-4-5", messages=[Message(role="user", content=text)], **kw)


async def test_text_reply_has_real_shape(llm_server, make_client):  # noqa: F811
    llm_server.script(Reply.of_text("Paris", input_tokens=12, output_tokens=3))
    response = await make_client().complete(ask("capital of France?", system="be brief"))
    assert response.text == "Paris"
    assert response.tool_input is None
    assert response.stop_reason == "end_turn"
    assert response.id and response.id.startswith("msg_")
    assert (response.usage.input_tokens, response.usage.output_tokens) == (12, 3)
    assert response.retries == 0 and not response.cached
    seen = llm_server.requests[0]
    assert seen.path == "/v1/messages"
    assert "test-key" in (seen.headers.get("x-api-key", "") + seen.headers.get("authorization", ""))
    assert seen.body["system"] == "be brief"
    assert seen.body["model"] == "claude-haiku-4-5"
    assert seen.body["messages"] == [{"role": "user", "content": "capital of France?"}]
    assert "tools" not in seen.body


async def test_forced_tool_is_sent_and_its_input_returned(llm_server, make_client):  # noqa: F811
    tool = ToolSpec(name="grade", description="a grade", input_schema={"type": "object"})
    llm_server.script(Reply.of_tool({"score": 80}))
    response = await make_client().complete(ask(tool=tool))
    assert response.tool_input == {"score": 80}
    assert response.stop_reason == "tool_use"
    body = llm_server.requests[0].body
    assert body["tool_choice"] == {"type": "tool", "name": "grade"}
    assert body["tools"][0]["name"] == "grade"


async def test_429_retry_after_is_honoured(llm_server, make_client):  # noqa: F811
    llm_server.script(Reply.rate_limited(retry_after=0.4), Reply.of_text("ok"))
    started = time.perf_counter()
    response = await make_client().complete(ask())
    elapsed = time.perf_counter() - started
    assert response.text == "ok" and response.retries == 1
    assert llm_server.count == 2
    assert elapsed >= 0.4


async def test_429_without_retry_after_uses_tiny_backoff(llm_server, make_client):  # noqa: F811
    async def timed(backoff_base: float) -> float:
        llm_server.script(Reply.rate_limited(), Reply.of_text("ok"))
        started = time.perf_counter()
        response = await make_client(backoff_base=backoff_base).complete(ask())
        assert response.retries == 1
        return time.perf_counter() - started

    # the configured backoff decides the wait (no retry-after to follow): 2 s of backoff waits
    # at least 2 s, 1 ms of it far less (a margin wide enough for a loaded machine)
    assert await timed(2.0) >= 2.0
    assert await timed(0.001) < 1.5


async def test_529_and_500_are_retried_and_counted(llm_server, make_client):  # noqa: F811
    llm_server.script(Reply.overloaded(), Reply.server_error(), Reply.of_text("fine"))
    with usage_scope() as totals:
        response = await make_client().complete(ask())
    assert response.text == "fine" and response.retries == 2
    assert llm_server.count == 3
    assert (totals.calls, totals.retries) == (1, 2)


async def test_retries_exhausted_raise_call_failed(llm_server, make_client):  # noqa: F811
    llm_server.script(*[Reply.overloaded()] * 3)
    with pytest.raises(LLMCallFailed) as caught:
        await make_client(max_retries=2).complete(ask())
    assert caught.value.status == 529
    assert "3 attempts" in str(caught.value) and "overloaded_error" in str(caught.value)
    assert llm_server.count == 3


async def test_bad_request_is_not_retried(llm_server, make_client):  # noqa: F811
    llm_server.script(Reply.error(400, "invalid_request_error", "max_tokens too large"))
    with pytest.raises(LLMCallFailed, match="max_tokens too large") as caught:
        await make_client().complete(ask())
    assert caught.value.status == 400
    assert llm_server.count == 1


async def test_rejected_key_is_a_config_error(llm_server, make_client):  # noqa: F811
    llm_server.script(Reply.error(401, "authentication_error", "invalid x-api-key"))
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        await make_client().complete(ask())
    assert llm_server.count == 1


async def test_slow_reply_times_out_then_retry_succeeds(llm_server, make_client):  # noqa: F811
    # the reply that comes too late is never read: had the client waited for it, it would answer "late"
    llm_server.script(Reply.of_text("late", delay=3.0), Reply.of_text("on time"))
    response = await make_client(timeout=0.3).complete(ask())
    assert response.text == "on time" and response.retries == 1


async def test_timeouts_exhausted_raise(llm_server, make_client):  # noqa: F811
    # both replies would come (3 s late): the failure, not a reply, shows the client gave up on each
    llm_server.script(*[Reply.of_text("late", delay=3.0)] * 2)
    with pytest.raises(LLMCallFailed, match=r"no reply within 0.3 s after 2 attempts"):
        await make_client(timeout=0.3, max_retries=1).complete(ask())
    assert llm_server.count == 2


MALFORMED = {
    "html": (Reply.html(), "got '<!doctype html>"),
    "html-as-json": (Reply.html(content_type="application/json"), "the body is not JSON"),
    "empty-object": (Reply.empty_object(), "the message has no content list"),
    "truncated": (Reply.bad_json(), "the body is not JSON"),
    "list": (Reply(raw_body=b"[]"), "got 'list'"),
    "content-str": (Reply(raw_body=b'{"type": "message", "content": "hi", "usage": {}}'),
                    "the message has no content list"),
    "text-without-text": (Reply(raw_body=b'{"type": "message", "content": [{"type": "text"}], '
                                         b'"usage": {"input_tokens": 1, "output_tokens": 1}}'),
                          "a text block without text"),
    "no-usage": (Reply(raw_body=b'{"type": "message", "content": []}'), "the message has no token usage"),
}


@pytest.mark.parametrize("name", MALFORMED)
async def test_a_200_that_is_not_a_message_is_malformed_and_not_retried(llm_server, make_client, name):  # noqa: F811
    from evalloop.llm.errors import MalformedReply, is_case_level
    from evalloop.run.failures import Failure, classify

    reply, why = MALFORMED[name]
    llm_server.script(reply)
    with pytest.raises(MalformedReply) as caught:
        await make_client().complete(ask())
    assert f"not a Messages-API reply: {why}" in str(caught.value), str(caught.value)
    assert "ANTHROPIC_BASE_URL" in str(caught.value) and llm_server.count == 1
    assert is_case_level(caught.value) and classify(caught.value) is Failure.INFRA


async def test_connection_refused_names_the_url():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    client = AnthropicClient(**{**KW, "base_url": url, "max_retries": 2})
    with pytest.raises(LLMConnectionFailed) as caught:
        await client.complete(ask())
    await client.aclose()
    line = str(caught.value)
    assert isinstance(caught.value, ConnectionFailed) and isinstance(caught.value, LLMError)
    assert url in line and "3 attempts" in line and "ANTHROPIC_BASE_URL" in line
    assert "\n" not in line


def test_missing_key_is_a_config_error(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="set ANTHROPIC_API_KEY or use --engine local"):
        AnthropicClient()


async def test_concurrency_is_bounded(make_client):
    with LLMServer(latency=0.1) as server:
        client = make_client(base_url=server.url, concurrency=3)
        replies = await asyncio.gather(*(client.complete(ask(str(i))) for i in range(9)))
    assert len(replies) == 9 and server.count == 9
    assert server.max_active == 3


async def test_cost_uses_the_price_table(llm_server, make_client):  # noqa: F811
    llm_server.script(
        Reply.of_text("a", input_tokens=1000, output_tokens=200),
        Reply.of_text("b", input_tokens=1000, output_tokens=200, model="claude-haiku-4-5-20251001"),
    )
    client = make_client()
    with usage_scope() as totals:
        first = await client.complete(ask())
        second = await client.complete(ask())
    assert first.cost_usd == pytest.approx(0.002)  # 1000 * $1/M + 200 * $5/M
    assert second.cost_usd == pytest.approx(0.002)  # dated id priced as its family
    assert totals.cost_usd == pytest.approx(0.004)
    assert (totals.input_tokens, totals.output_tokens, totals.calls) == (2000, 400, 2)


async def test_prices_can_be_overridden(llm_server, make_client):  # noqa: F811
    llm_server.script(Reply.of_text("a", input_tokens=1000, output_tokens=200))
    client = make_client(prices={"claude-haiku-4-5": (2.0, 10.0)})
    response = await client.complete(ask())
    assert response.cost_usd == pytest.approx(0.004)


async def test_refusal_comes_back_with_its_stop_reason(llm_server, make_client):  # noqa: F811
    llm_server.script(Reply.refusal("no"))
    response = await make_client().complete(ask())
    assert response.stop_reason == "refusal" and response.text == "no"


async def test_client_from_env_honours_anthropic_env(llm_server, monkeypatch):  # noqa: F811
    monkeypatch.delenv("EVALLOOP_LLM_BASE_URL", raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "env-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", llm_server.url)
    client = client_from_env()
    assert isinstance(client, AnthropicClient) and client.model == "claude-haiku-4-5"
    await client.complete(ask())
    await client.aclose()
    headers = llm_server.requests[0].headers
    assert "env-key" in headers.get("x-api-key", "") + headers.get("authorization", "")
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    assert client_from_env() is None
    assert issubclass(LLMError, EvalloopError)


def test_parse_retry_after_forms():
    from email.utils import formatdate

    from evalloop.llm.retry import parse_retry_after

    assert parse_retry_after({"retry-after": "2"}) == 2.0
    assert parse_retry_after({"retry-after": "0.25"}) == 0.25
    assert parse_retry_after({"retry-after-ms": "150", "retry-after": "9"}) == 0.15
    assert 8.0 < parse_retry_after({"retry-after": formatdate(time.time() + 10, usegmt=True)}) <= 10
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None
