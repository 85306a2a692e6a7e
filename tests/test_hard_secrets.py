"""Credentials never leave memory: no URL userinfo or secret query value reaches a message, a log,
a report or the history; webhook and base URLs are checked when the configuration loads."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from evalloop.config import load_settings
from evalloop.errors import ConfigError, EvalloopError
from evalloop.llm import AnthropicClient, LLMRequest, Message
from evalloop.loop.pipeline import run_suite
from evalloop.redact import redact_text, redact_url
from evalloop.scheduling.sinks import WebhookSink, notify
from support.project import TARGET, make_project
from support.sqlitedb import sqlite_conn
from support.webhook_server import closed_port_url, webhook_server

EVALLOOP = shutil.which("evalloop") or str(Path(sys.executable).parent / "evalloop")
SECRETS = ("sk-ant-PASS1", "TOKEN2", "SIG3")
CALLER = TARGET + '''
import httpx

def call(input):
    httpx.post(os.environ["SECRET_URL"], json=input, timeout=5).raise_for_status()
'''
SUITE = {"name": "s", "target": "sut:call", "scorers": ["equals"],
         "cases": [{"id": f"c{i}", "input": {"i": i}, "expected": i} for i in range(3)]}


def secret_url(base: str) -> str:
    host = base.split("://", 1)[1]
    return f"http://evals:sk-ant-PASS1@{host}?token=TOKEN2&sig=SIG3&page=2"


def leaked(text: str) -> list[str]:
    return [s for s in SECRETS if s in text]


def test_redact_url_strips_userinfo_and_secret_parameters():
    url = "https://bob:hunter2@hooks.example/x?api_key=A&Token=B&X-Amz-Signature=C&page=2#frag"
    clean = redact_url(url)
    assert not {"hunter2", "bob", "=A", "=B", "=C"} & {p for p in ("hunter2", "bob", "=A", "=B", "=C") if p in clean}
    assert clean == "https://***@hooks.example/***"  # cut to scheme, host and port (tests/test_url_secrets.py)
    assert redact_text(f"failed for url '{url}' twice") == f"failed for url '{clean}' twice"
    assert redact_url("http://127.0.0.1:8080/v1") == "http://127.0.0.1:8080/v1"


def test_a_credential_in_a_target_error_reaches_no_file_and_no_output(tmp_path):
    root = make_project(tmp_path / "p", {"s": SUITE}, target=CALLER)
    with webhook_server(statuses=[500]) as server:
        proc = subprocess.run([EVALLOOP, "run", "--suite", "s", "--json-out", str(tmp_path / "out.json"),
                               "--junit", str(tmp_path / "junit.xml"), "-C", str(root),
                               "--no-fail-on-regression"],  # every call failed: an invalid run
                              capture_output=True, text=True, timeout=120,
                              env={**os.environ, "SECRET_URL": secret_url(server.url), "NO_COLOR": "1"})
        assert len(server.received) == 3  # the calls were made, with the credential
    assert proc.returncode == 0, proc.stderr
    db = root / "history" / "evalloop.db"
    with sqlite_conn(db) as conn:
        errors = [r[0] for r in conn.execute("SELECT error FROM case_results")]
        stored = "\n".join(str(row) for table in ("runs", "case_results", "case_scores", "scorer_summaries")
                           for row in conn.execute(f"SELECT * FROM {table}"))
    assert all("500 Internal Server Error" in e and "://***@127.0.0.1" in e for e in errors), errors
    for name, text in [("db", stored), ("stdout", proc.stdout), ("stderr", proc.stderr),
                       ("json", (tmp_path / "out.json").read_text()), ("junit", (tmp_path / "junit.xml").read_text()),
                       ("run log", (root / "history" / "s.jsonl").read_text())]:
        assert not leaked(text), (name, text[:2000])


async def test_a_credential_in_the_llm_base_url_stays_out_of_the_error():
    client = AnthropicClient(api_key="k", base_url=secret_url(closed_port_url()), max_retries=0,
                             backoff_base=0.001)
    with pytest.raises(EvalloopError) as info:
        await client.complete(LLMRequest(model="claude-haiku-4-5", messages=[Message(role="user", content="hi")]))
    await client.aclose()
    assert "127.0.0.1" in str(info.value) and not leaked(str(info.value)) and not leaked(info.value.one_line())


def test_a_webhook_url_with_a_token_is_never_logged(tmp_path, caplog):
    root = make_project(tmp_path / "p", {"s": {**SUITE, "target": "sut:echo"}})
    report = run_suite("s", settings=load_settings(root))
    caplog.set_level(logging.DEBUG)
    with webhook_server(statuses=[500]) as server:
        sink = WebhookSink(secret_url(server.url), attempts=2, backoff=0.001)
        deliveries = notify(report, [sink], only_alarms=False)
        assert len(server.received) == 2
    assert not deliveries[0].ok and not leaked(deliveries[0].error)
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "sink webhook" in logged and not leaked(logged), logged
    assert not [r for r in caplog.records if r.name.startswith(("httpx", "httpcore")) and r.levelno < logging.WARNING]


@pytest.mark.parametrize(("key", "value"), [
    ("webhook_url", "file:///etc/passwd"),
    ("webhook_url", "hooks.example.com/evals?token=TOKEN2"),
    ("memory_url", "ftp://evals:sk-ant-PASS1@mem.example/"),
])
def test_bad_urls_fail_when_the_configuration_loads(tmp_path, key, value):
    (tmp_path / "evalloop.toml").write_text(f'{key} = "{value}"\n')
    with pytest.raises(ConfigError) as info:
        load_settings(tmp_path)
    assert key in str(info.value) and "http" in str(info.value) and not leaked(str(info.value))


def test_a_bad_base_url_in_the_environment_fails_when_the_configuration_loads(tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "localhost:8080?key=TOKEN2")
    with pytest.raises(ConfigError) as info:
        load_settings(tmp_path)
    assert "ANTHROPIC_BASE_URL" in str(info.value) and not leaked(str(info.value))


def test_a_scheduler_logs_no_webhook_token_and_no_database_password(tmp_path, monkeypatch, pg_server):
    """The probe: a scheduler on a shared PostgreSQL database (password in the URL) posting a
    regression to a webhook whose URL carries a token (the receiver fails, so it retries)."""
    import signal
    from datetime import UTC, datetime

    from evalloop.scheduling import ledger
    from evalloop.scheduling.scheduler import add_schedule
    from support.project import controlled_suite, wait_for, write_answers

    url = pg_server.create_database().replace("postgres@", "postgres:sk-ant-PASS1@", 1)
    root = make_project(tmp_path / "p", {"controlled": controlled_suite(6)})
    answers = tmp_path / "answers.json"
    monkeypatch.setenv("EVALLOOP_TEST_ANSWERS", str(answers))
    monkeypatch.setenv("EVALLOOP_HISTORY_URL", url)
    settings = load_settings(root)
    write_answers(answers, {f"c{i}": 0.8 for i in range(6)})
    for _ in range(3):
        run_suite("controlled", settings=settings)
    write_answers(answers, {f"c{i}": 0.3 for i in range(6)})  # the scheduled run regresses
    add_schedule(settings, ["controlled"], every="1h", job_id="nightly", first_run=datetime.now(UTC))
    with webhook_server(statuses=[500]) as server:
        logged = tmp_path / "scheduler.log"
        with open(logged, "w") as sink:
            proc = subprocess.Popen([EVALLOOP, "scheduler", "start", "--poll", "0.2", "-C", str(root)],
                                    stdout=subprocess.PIPE, stderr=sink, text=True,
                                    env={**os.environ, "EVALLOOP_WEBHOOK_URL": secret_url(server.url),
                                         "NO_COLOR": "1"})
        try:
            sent = wait_for(lambda: len(server.received) >= settings.webhook_retries, 90)
            done = wait_for(lambda: [e for e in ledger.entries(url, "nightly") if e.status == "completed"], 30)
            # the sink's failure line follows the last try: waited for, it is what is checked
            wait_for(lambda: "sink webhook (" in logged.read_text(), 30)
            proc.send_signal(signal.SIGTERM)
            rc = proc.wait(60)
        finally:
            proc.kill()
    out, log = proc.stdout.read(), logged.read_text()
    assert sent and done and rc == 0, (rc, log)
    assert "sink webhook (http://***@127.0.0.1" in log and "scheduler started" in log, log
    assert not leaked(out + log), log
    for args in (["schedule", "list"], ["history", "--suite", "controlled"], ["doctor"]):
        shown = subprocess.run([EVALLOOP, *args, "-C", str(root)], capture_output=True, text=True, timeout=120,
                               env={**os.environ, "NO_COLOR": "1"})
        assert shown.returncode == 0 and not leaked(shown.stdout + shown.stderr), (args, shown)
