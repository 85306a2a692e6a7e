"""OpenAICompatClient against the loopback /v1/chat/completions server."""

from __future__ import annotations

import socket
import time

import pytest
from pydantic import BaseModel

from evalloop.errors import ConfigError, ConnectionFailed
from evalloop.llm import (
    LLMCallFailed,
    LLMRequest,
    Message,
    OpenAICompatClient,
    RefusalError,
    ToolSpec,
    client_from_env,
    require_client,
    structured,
    usage_scope,
)
from support.messages_server import Reply, llm_server  # noqa: F401


class Verdict(BaseModel):
    action: str
    reason: str


@pytest.fixture
async def client(llm_server):  # noqa: F811
    made = OpenAICompatClient(llm_server.openai_url, "llama3.1:8b", api_key="local", backoff_base=0.001, timeout=5.0)
    yield made
    await made.aclose()


def ask(text: str = "hi", **kw) -> LLMRequest:
    return LLMRequest(model="llama3.1:8b", messages=[Message(role="user", content=text)], **kw)


async def test_text_reply_and_request_shape(llm_server, client):  # noqa: F811
    llm_server.script(Reply.of_text("hello", input_tokens=9, output_tokens=2))
    response = await client.complete(ask("hi", system="sys", temperature=0.0))
    assert response.text == "hello" and response.stop_reason == "end_turn"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (9, 2)
    assert response.id and response.id.startswith("chatcmpl-")
    assert response.cost_usd == 0.0  # local models are free
    seen = llm_server.requests[0]
    assert seen.path == "/v1/chat/completions"
    assert seen.headers["authorization"] == "Bearer local"
    assert seen.body["messages"] == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "hi"},
    ]
    assert seen.body["temperature"] == 0.0 and seen.body["max_tokens"] == 1024


async def test_forced_tool_is_function_calling(llm_server, client):  # noqa: F811
    tool = ToolSpec(name="decide", description="d", input_schema={"type": "object"})
    llm_server.script(Reply.of_tool({"action": "UPDATE"}))
    response = await client.complete(ask(tool=tool))
    assert response.tool_input == {"action": "UPDATE"} and response.stop_reason == "tool_use"
    body = llm_server.requests[0].body
    assert body["tools"] == [
        {
            "type": "function",
            "function": {"name": "decide", "description": "d", "parameters": {"type": "object"}},
        }
    ]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "decide"}}


async def test_structured_via_tools(llm_server, client):  # noqa: F811
    llm_server.script(Reply.of_tool({"action": "CREATE", "reason": "new fact"}))
    verdict = await structured(client, Verdict, prompt="decide")
    assert verdict == Verdict(action="CREATE", reason="new fact")


async def test_structured_text_json_fallback(llm_server, client):  # noqa: F811
    # A server without function calling answers in text; the fenced JSON is parsed.
    llm_server.script(Reply.of_text('```json\n{"action": "NOOP", "reason": "identical"}\n```'))
    verdict = await structured(client, Verdict, prompt="decide")
    assert verdict.action == "NOOP"
    assert llm_server.count == 1


async def test_structured_retry_after_malformed_text(llm_server, client):  # noqa: F811
    llm_server.script(Reply.of_text("{action: NOOP"), Reply.of_text('{"action":"NOOP","reason":"x"}'))
    verdict = await structured(client, Verdict, prompt="decide")
    assert verdict.reason == "x" and llm_server.count == 2


async def test_retry_after_and_5xx_are_retried(llm_server, client):  # noqa: F811
    llm_server.script(Reply.rate_limited(retry_after=0.3), Reply.server_error(), Reply.of_text("ok"))
    started = time.perf_counter()
    with usage_scope() as totals:
        response = await client.complete(ask())
    assert response.text == "ok" and response.retries == 2
    assert time.perf_counter() - started >= 0.3
    assert (totals.calls, totals.retries, llm_server.count) == (1, 2, 3)


async def test_not_found_is_not_retried(llm_server, client):  # noqa: F811
    llm_server.script(Reply.error(404, "not_found", "model 'llama3.1:8b' not found"))
    with pytest.raises(LLMCallFailed, match="not found") as caught:
        await client.complete(ask())
    assert caught.value.status == 404 and llm_server.count == 1


async def test_timeout_is_retried(llm_server):  # noqa: F811
    llm_server.script(Reply.of_text("late", delay=3.0), Reply.of_text("ok"))
    client = OpenAICompatClient(llm_server.openai_url, "m", backoff_base=0.001, timeout=0.3)
    response = await client.complete(ask())
    await client.aclose()
    assert response.text == "ok" and response.retries == 1


async def test_refusal(llm_server, client):  # noqa: F811
    llm_server.script(Reply.refusal("Sorry, no."))
    with pytest.raises(RefusalError):
        await structured(client, Verdict, prompt="decide")
    llm_server.script(Reply.refusal("Sorry, no."))
    response = await client.complete(ask())
    assert response.stop_reason == "refusal" and response.text == "Sorry, no."


MALFORMED = [Reply(raw_body=b"<html>proxy error</html>"), Reply.html(), Reply.empty_object(), Reply.bad_json(),
             Reply(raw_body=b'{"choices": ["x"]}'), Reply(raw_body=b"[]"),
             Reply(raw_body=b'{"choices": [{"message": {"content": [1]}}]}')]


@pytest.mark.parametrize("reply", MALFORMED, ids=["html-as-json", "html", "empty", "truncated", "choice-str",
                                                  "list", "content-list"])
async def test_a_body_that_is_not_a_chat_completion_is_malformed_and_not_retried(llm_server, client, reply):  # noqa: F811
    from evalloop.llm.errors import MalformedReply, is_case_level
    from evalloop.run.failures import Failure, classify

    llm_server.script(reply)
    with pytest.raises(MalformedReply, match="not a chat completion") as caught:
        await client.complete(ask())
    assert isinstance(caught.value, LLMCallFailed) and llm_server.count == 1
    assert is_case_level(caught.value) and classify(caught.value) is Failure.INFRA


async def test_connection_refused_names_the_url():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = OpenAICompatClient(f"http://127.0.0.1:{port}/v1", "m", max_retries=1, backoff_base=0.001)
    with pytest.raises(ConnectionFailed) as caught:
        await client.complete(ask())
    await client.aclose()
    assert f"http://127.0.0.1:{port}/v1/chat/completions" in str(caught.value)
    assert "EVALLOOP_LLM_BASE_URL" in str(caught.value)


async def test_client_from_env_prefers_the_local_server(llm_server, monkeypatch):  # noqa: F811
    monkeypatch.setenv("EVALLOOP_LLM_BASE_URL", llm_server.openai_url)
    monkeypatch.setenv("EVALLOOP_LLM_MODEL", "qwen2.5:7b")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "unused")
    client = client_from_env()
    assert isinstance(client, OpenAICompatClient) and client.model == "qwen2.5:7b"
    await client.complete(ask())
    await client.aclose()
    assert llm_server.count == 1
    monkeypatch.delenv("EVALLOOP_LLM_MODEL")
    with pytest.raises(ConfigError, match="EVALLOOP_LLM_MODEL"):
        client_from_env()


def test_require_client_says_what_is_missing(monkeypatch):
    for name in ("EVALLOOP_LLM_BASE_URL", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    assert client_from_env() is None
    with pytest.raises(ConfigError, match="set ANTHROPIC_API_KEY.*--engine local"):
        require_client()
