"""The HTTP memory adapter against a mem0-style memory service on loopback."""

from __future__ import annotations

import socket

import pytest

from evalloop.errors import ConfigError, ConnectionFailed, EvalloopError
from evalloop.memory import HTTPMemoryAdapter, HTTPMemoryConfig
from support.http_memory_server import MemoryServer, memory_server  # noqa: F401
from support.memory_contract import check_adapter

FAILURE = "Eval memory-similarity-eval regression detected: current 0.68, baseline 0.85"
TAGS = "eval-failure,memory-similarity-eval,regression"


def test_store_then_find_round_trip(memory_server: MemoryServer) -> None:  # noqa: F811
    adapter = HTTPMemoryAdapter(memory_server.url)
    mid = adapter.store(FAILURE, TAGS, '{"eval_name": "memory-similarity-eval", "drop": 0.2}')
    other = adapter.store("Unrelated: the checkout page is slow", ["perf"])
    assert mid != other and memory_server.store.get(mid).information == FAILURE  # really stored

    path, body = memory_server.requests[0]
    assert path == "/memories"
    assert body["messages"] == [{"role": "user", "content": FAILURE}]
    assert body["metadata"]["tags"] == ["eval-failure", "memory-similarity-eval", "regression"]
    assert body["metadata"]["drop"] == 0.2 and body["user_id"] == "evalloop"
    assert body["infer"] is False

    hits = adapter.find("memory similarity eval regression", limit=3)
    assert hits[0].record.id == mid and hits[0].information == FAILURE
    assert hits[0].record.tags == ["eval-failure", "memory-similarity-eval", "regression"]
    assert hits[0].record.metadata["eval_name"] == "memory-similarity-eval"
    assert hits[0].record.created_at is not None and hits[0].score > 0
    path, body = memory_server.requests[-1]
    assert path == "/search" and body["top_k"] == 3 and "limit" not in body
    assert body["filters"] == {"user_id": "evalloop"} and "user_id" not in body  # identity inside filters

    tagged = adapter.find("checkout page slow", limit=5, tags=["eval-failure"])
    assert [h.record.id for h in tagged] == [mid]  # tag filter: exact, all tags
    sent = memory_server.requests[-1][1]
    assert sent["filters"] == {"user_id": "evalloop", "tags": ["eval-failure"]} and sent["top_k"] == 100
    assert sent["threshold"] == 0.0 and "threshold" not in body   # no cut-off for filtered lookups only
    adapter.close()


def test_http_adapter_keeps_the_adapter_protocols_promises(memory_server: MemoryServer) -> None:  # noqa: F811
    check_adapter(HTTPMemoryAdapter(memory_server.url))


def test_paths_identity_and_headers_are_configurable(memory_server: MemoryServer) -> None:  # noqa: F811
    config = HTTPMemoryConfig(
        base_url=memory_server.url + "/",
        store_path="/v2/memories",
        search_path="/v2/search",
        user_id=None,
        agent_id="sut-agent",
        headers={"Authorization": "Token abc"},
    )
    adapter = HTTPMemoryAdapter(config)
    adapter.store("a memory for the agent", ["x"])
    assert [h.information for h in adapter.find("memory for the agent", 1)] == ["a memory for the agent"]
    paths = [p for p, _ in memory_server.requests]
    assert paths == ["/v2/memories", "/v2/search"]
    body = memory_server.requests[0][1]
    assert body["agent_id"] == "sut-agent" and "user_id" not in body


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_service_is_one_clear_line() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    adapter = HTTPMemoryAdapter(url, timeout=2)
    with pytest.raises(ConnectionFailed) as err:
        adapter.store(FAILURE, TAGS)
    line = str(err.value)
    assert "cannot reach the memory service" in line and f"{url}/memories" in line
    assert "\n" not in line and err.value.exit_code == 1


def test_slow_service_times_out(memory_server: MemoryServer) -> None:  # noqa: F811
    memory_server.delay = 1.0
    adapter = HTTPMemoryAdapter(memory_server.url, timeout=0.2)
    with pytest.raises(ConnectionFailed, match="did not answer within 0.2 s"):
        adapter.find("anything")


def test_error_answers_and_bad_input(memory_server: MemoryServer) -> None:  # noqa: F811
    adapter = HTTPMemoryAdapter(memory_server.url)
    memory_server.status = 503
    with pytest.raises(ConnectionFailed, match="HTTP 503"):
        adapter.store("x")
    memory_server.status = 200
    with pytest.raises(EvalloopError, match="metadata"):
        adapter.store("x", metadata="[1, 2]")
    assert memory_server.requests[-1][0] == "/memories" and len(memory_server.requests) == 1
    with pytest.raises(ConfigError, match="not an http"):
        HTTPMemoryAdapter("localhost:8000")


def test_a_server_that_ignores_infer_false_is_warned_about(memory_server: MemoryServer) -> None:  # noqa: F811
    memory_server.rewrite = "User likes tokens"
    adapter = HTTPMemoryAdapter(memory_server.url)
    with pytest.warns(UserWarning, match="infer=false"):
        adapter.store("OAuth tokens need a 5 minute buffer", ["x"], {"run_id": "r-1", "user_id": "someone"})
    meta = memory_server.requests[0][1]["metadata"]
    assert meta["eval_run_id"] == "r-1" and meta["eval_user_id"] == "someone" and "run_id" not in meta


def test_list_and_update_over_http(memory_server: MemoryServer) -> None:  # noqa: F811
    adapter = HTTPMemoryAdapter(memory_server.url)
    a = adapter.store("first", ["eval-failure", "suite:a"], {"eval_suite": "a"})
    adapter.store("second", ["eval-failure", "suite:b"], {"eval_suite": "b"})
    assert [r.information for r in adapter.list(tags=["suite:a"])] == ["first"]
    adapter.update(a, "first, revised", ["eval-failure", "suite:a", "status:resolved"], {"eval_suite": "a"})
    assert memory_server.requests[-1][0] == f"/memories/{a}"
    (record,) = adapter.list(tags=["status:resolved"])
    assert record.id == a and record.information == "first, revised"
