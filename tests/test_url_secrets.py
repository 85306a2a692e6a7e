"""URLs carry secrets in more places than userinfo and the query: a webhook's path (Slack,
Discord), a base URL's path parameters. Every URL evalloop prints or stores is cut to scheme,
host and port unless its path is known to be secret-free; a base URL's ``user:pass@`` is sent
as the Basic auth a proxy expects."""

from __future__ import annotations

import base64
import logging
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from evalloop.config import load_settings
from evalloop.loop.pipeline import run_suite
from evalloop.redact import redact_text, redact_url
from evalloop.scheduling.sinks import WebhookSink, notify
from support.cli import EVALLOOP
from support.messages_server import LLMServer, Reply
from support.project import make_project
from support.sqlitedb import sqlite_conn
from support.webhook_server import webhook_server

ECHO = {"name": "s", "target": "sut:echo", "scorers": ["equals"],
        "cases": [{"id": f"c{i}", "input": i, "expected": i} for i in range(3)]}


@pytest.mark.parametrize(("url", "shown"), [
    ("https://hooks.slack.com/services/T0001/B0002/XXXXsecretXXXX", "https://hooks.slack.com/***"),
    ("https://discord.com/api/webhooks/123456/tok-en_value", "https://discord.com/***"),
    ("http://127.0.0.1:8080/hook/sk-ant-PATH4", "http://127.0.0.1:8080/***"),
    ("http://127.0.0.1:8080/v1;token=TOKEN5", "http://127.0.0.1:8080/***"),
    ("http://bob:hunter2@proxy.example:3128/v1?page=2", "http://***@proxy.example:3128/***"),
    ("https://example.com/x#frag", "https://example.com/***"),
    ("http://127.0.0.1:8080/v1", "http://127.0.0.1:8080/v1"),  # known to be secret-free
    ("https://api.anthropic.com", "https://api.anthropic.com"),
    ("http://localhost:11434/v1/chat/completions", "http://localhost:11434/v1/chat/completions"),
    ("postgresql://u:pw@db:5432/evals", "postgresql://***@db:5432/evals"),  # a database's name is kept
    ("sqlite:////srv/p/history/evalloop.db", "sqlite:////srv/p/history/evalloop.db"),
])
def test_a_url_is_cut_to_scheme_host_and_port_unless_known_secret_free(url, shown):
    assert redact_url(url) == shown
    assert redact_text(f"failed: {url} (twice)") == f"failed: {shown} (twice)"


def test_a_token_in_a_webhook_path_is_never_logged(tmp_path, caplog):
    root = make_project(tmp_path / "p", {"s": ECHO})
    report = run_suite("s", settings=load_settings(root))
    caplog.set_level(logging.DEBUG)
    with webhook_server(statuses=[500]) as server:
        sink = WebhookSink(f"{server.url}/hook/sk-ant-PATH4", attempts=1, backoff=0.001)
        deliveries = notify(report, [sink], only_alarms=False)
        assert len(server.received) == 1
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "sink webhook (http://127.0.0.1:" in logged, logged
    assert "sk-ant-PATH4" not in logged + deliveries[0].error, logged


def similarity_project(root: Path) -> Path:
    from evalloop.suites.models import PACKAGE_FIXTURES

    similarity = yaml.safe_load((PACKAGE_FIXTURES / "similarity.yaml").read_text(encoding="utf-8"))
    (root / "fixtures").mkdir(parents=True)
    (root / "fixtures" / "similarity.yaml").write_text(  # no floor: the server answers CREATE to all
        yaml.safe_dump({**similarity, "cases": similarity["cases"][:2], "verdict": {"min_score": 0}},
                       sort_keys=False))
    return root


def run_llm(root: Path, base_url: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "EVALLOOP_"))}
    env |= {"ANTHROPIC_API_KEY": "test", "ANTHROPIC_BASE_URL": base_url, "NO_COLOR": "1"}
    return subprocess.run([EVALLOOP, "run", "--suite", "similarity", "--engine", "llm", "--no-cache", "--json"],
                          cwd=root, capture_output=True, text=True, timeout=300, env=env)


def stored(root: Path) -> bytes:
    db = root / "history" / "evalloop.db"
    with sqlite_conn(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return b"".join(p.read_bytes() for p in (root / "history").iterdir() if p.is_file())


def test_a_secret_in_the_base_url_path_reaches_no_output_and_no_history(tmp_path):
    root = similarity_project(tmp_path / "p")
    with LLMServer(lambda seen: Reply.of_tool({"action": "CREATE", "reason": "scripted"})) as server:
        proc = run_llm(root, f"{server.url}/v1;token=TOKEN5")
    assert "TOKEN5" not in proc.stdout + proc.stderr, proc.stderr
    assert b"TOKEN5" not in stored(root)


def test_a_base_url_with_user_and_password_is_sent_as_basic_auth(tmp_path):
    root = similarity_project(tmp_path / "p")
    with LLMServer(lambda seen: Reply.of_tool({"action": "CREATE", "reason": "scripted"})) as server:
        host = server.url.split("://", 1)[1]
        proc = run_llm(root, f"http://evals:sk-ant-PASS1@{host}")
        seen = list(server.requests)
    assert proc.returncode == 0, proc.stderr
    assert seen and {s.headers.get("authorization") for s in seen} == {
        "Basic " + base64.b64encode(b"evals:sk-ant-PASS1").decode()}
    assert {s.headers.get("x-api-key") for s in seen} == {"test"}
    assert "sk-ant-PASS1" not in proc.stdout + proc.stderr
    assert b"sk-ant-PASS1" not in stored(root)


def test_remembered_secrets_are_masked_wherever_they_appear_but_plain_words_are_not():
    from evalloop.redact import remember_secrets

    remember_secrets("http://127.0.0.1:9/v1;token=Echo7Token")
    remember_secrets("postgresql://postgres:postgres@db:5432/evals")  # a plain word: not masked as text
    said = redact_text("404 not found: /v1;token=Echo7Token/v1/messages (postgres is up)")
    assert said == "404 not found: /v1;token=***/v1/messages (postgres is up)"


async def test_an_openai_compatible_base_url_with_user_and_password_is_sent_as_basic_auth():
    from evalloop.errors import ConfigError
    from evalloop.llm import LLMRequest, Message
    from evalloop.llm.openai_client import OpenAICompatClient

    with LLMServer(lambda seen: Reply.of_text("fine")) as server:
        host = server.url.split("://", 1)[1]
        client = OpenAICompatClient(f"http://evals:sk-ant-PASS1@{host}/v1", "m", max_retries=0)
        reply = await client.complete(LLMRequest(model="m", messages=[Message(role="user", content="hi")]))
        await client.aclose()
        (seen,) = server.requests
    assert reply.text == "fine"
    assert seen.headers["authorization"] == "Basic " + base64.b64encode(b"evals:sk-ant-PASS1").decode()
    with pytest.raises(ConfigError, match="one way") as info:  # a key would need the same header
        OpenAICompatClient(f"http://evals:sk-ant-PASS1@{host}/v1", "m", api_key="k")
    assert "sk-ant-PASS1" not in info.value.one_line()


def test_an_anthropic_base_url_with_credentials_and_a_bearer_token_is_refused_in_one_line(monkeypatch):
    from evalloop.errors import ConfigError
    from evalloop.llm import AnthropicClient

    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "bearer")
    with pytest.raises(ConfigError, match="one way") as info:
        AnthropicClient(api_key="k", base_url="http://evals:sk-ant-PASS1@127.0.0.1:9")
    assert "sk-ant-PASS1" not in info.value.one_line() and "ANTHROPIC_BASE_URL" in info.value.one_line()
