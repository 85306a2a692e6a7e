"""Structured replies: forced tool, text-JSON fallback, one retry, typed errors."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, Field

from evalloop.errors import EvalloopError
from evalloop.llm import (
    AnthropicClient,
    LLMError,
    RefusalError,
    ReplyParseError,
    parse_json_reply,
    structured,
    tool_for,
    usage_scope,
)
from support.messages_server import Reply, llm_server  # noqa: F401


class Judgement(BaseModel):
    """A graded verdict."""

    score: int = Field(ge=0, le=100)
    issues: list[str] = []


@pytest.fixture
async def client(llm_server):  # noqa: F811
    made = AnthropicClient(api_key="k", base_url=llm_server.url, backoff_base=0.001)
    yield made
    await made.aclose()


@pytest.mark.parametrize(
    "text",
    [
        '{"score": 70, "issues": []}',
        '```json\n{"score": 70, "issues": []}\n```',
        '```\n{"score": 70, "issues": []}\n```',
        '  ```JSON\n{"score": 70, "issues": []}```  ',
        'Here is my verdict:\n```json\n{"score": 70, "issues": []}\n```\nThanks.',
        'Verdict: {"score": 70, "issues": []} -- done',
        '```json\n{"score": 70, "issues": []}',
    ],
)
def test_parse_json_reply_strips_fences_and_prose(text):
    assert parse_json_reply(text) == {"score": 70, "issues": []}


@pytest.mark.parametrize("text", ["", "{not json", "no json here", "[1, 2]", "```json\n```"])
def test_parse_json_reply_raises_with_the_text(text):
    with pytest.raises(ReplyParseError) as caught:
        parse_json_reply(text)
    assert caught.value.raw == text
    assert isinstance(caught.value, EvalloopError)


def test_tool_for_uses_the_model_schema():
    tool = tool_for(Judgement)
    assert tool.name == "judgement" and tool.description == "A graded verdict."
    assert tool.input_schema["type"] == "object"
    assert set(tool.input_schema["properties"]) == {"score", "issues"}
    assert tool.input_schema["required"] == ["score"]
    assert tool_for(Judgement, "grade").name == "grade"


async def test_forced_tool_reply(llm_server, client):  # noqa: F811
    llm_server.script(Reply.of_tool({"score": 85, "issues": ["terse"]}))
    verdict = await structured(client, Judgement, prompt="grade this", system="be harsh")
    assert verdict == Judgement(score=85, issues=["terse"])
    body = llm_server.requests[0].body
    assert body["tool_choice"] == {"type": "tool", "name": "judgement"}
    assert body["tools"][0]["input_schema"]["properties"]["score"]["maximum"] == 100
    assert body["system"] == "be harsh" and body["max_tokens"] == 512
    assert llm_server.count == 1


async def test_text_reply_falls_back_to_json_parse(llm_server, client):  # noqa: F811
    llm_server.script(Reply.of_text('```json\n{"score": 40, "issues": ["vague"]}\n```'))
    verdict = await structured(client, Judgement, prompt="grade")
    assert verdict.score == 40 and verdict.issues == ["vague"]
    assert llm_server.count == 1


async def test_malformed_reply_is_retried_once_with_the_error(llm_server, client):  # noqa: F811
    llm_server.script(Reply.of_text("{score: seventy"), Reply.of_tool({"score": 70}))
    verdict = await structured(client, Judgement, prompt="grade")
    assert verdict.score == 70
    assert llm_server.count == 2
    retry = llm_server.requests[1].body["messages"]
    assert [m["role"] for m in retry] == ["user", "assistant", "user"]
    assert retry[1]["content"] == "{score: seventy"
    assert "not JSON" in retry[2]["content"] and '"score"' in retry[2]["content"]


async def test_unparseable_twice_raises_reply_parse_error(llm_server, client):  # noqa: F811
    llm_server.script(Reply.of_text("I think it is good."), Reply.of_text("Still prose."))
    with usage_scope() as totals, pytest.raises(ReplyParseError) as caught:
        await structured(client, Judgement, prompt="grade")
    error = caught.value
    assert "not JSON" in error.what and "after one retry" in error.what
    assert error.raw == "Still prose."
    assert isinstance(error, LLMError)
    assert llm_server.count == 2
    assert totals.calls == 2  # the failed calls still cost tokens and are counted


async def test_schema_mismatch_names_the_field(llm_server, client):  # noqa: F811
    llm_server.script(Reply.of_tool({"score": "high"}), Reply.of_tool({"score": 150}))
    with pytest.raises(ReplyParseError, match=r"reply does not match Judgement: score") as caught:
        await structured(client, Judgement, prompt="grade")
    assert "150" in caught.value.raw


async def test_refusal_is_a_distinct_error_and_not_retried(llm_server, client):  # noqa: F811
    llm_server.script(Reply.refusal("I won't grade that."))
    with pytest.raises(RefusalError, match="refused") as caught:
        await structured(client, Judgement, prompt="grade")
    assert caught.value.text == "I won't grade that."
    assert not isinstance(caught.value, ReplyParseError)
    assert llm_server.count == 1


async def test_model_override_is_sent(llm_server, client):  # noqa: F811
    llm_server.script(Reply.of_tool({"score": 1}))
    await structured(client, Judgement, prompt="grade", model="claude-haiku-4-5-20251001", max_tokens=64)
    body = llm_server.requests[0].body
    assert body["model"] == "claude-haiku-4-5-20251001" and body["max_tokens"] == 64
