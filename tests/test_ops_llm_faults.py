"""An API that answers 200 with something that is not a Messages-API reply is an infrastructure
fault, and a model reply that cannot be used is the product's failure.

The reference ``decide`` on ``--engine llm``, the real anthropic SDK, the real CLI and a loopback
Messages-API server: HTML, ``{}`` or truncated JSON with status 200 make the case errored, so the
run is invalid, ``--fail-on-regression`` exits 1, no failure memory is written and the run never
becomes a baseline. A reply the model garbles, or one that misses the suite's deadline, fails its
case with a real 0 and is counted as a target failure.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from evalloop import RunOptions
from evalloop.config import load_settings
from evalloop.loop.pipeline import arun_suite
from evalloop.suites.models import PACKAGE_FIXTURES, Suite
from support.messages_server import LLMServer, Reply, Seen
from support.sqlitedb import sqlite_conn

EVALLOOP = shutil.which("evalloop") or str(Path(sys.executable).parent / "evalloop")
SIMILARITY = yaml.safe_load((PACKAGE_FIXTURES / "similarity.yaml").read_text(encoding="utf-8"))
CASES = [c for c in SIMILARITY["cases"] if not c.get("expect")]
ANSWERS = {c["input"]["incoming"]["content"]: c["expected"]["action"] for c in CASES}


def incoming(seen: Seen) -> str:
    text = str(seen.body["messages"][0]["content"])
    found = re.search(r"<<<INCOMING MEMORY ([0-9a-f]+)>>>\n(.*?)\n<<<END INCOMING MEMORY \1>>>", text, re.DOTALL)
    assert found, "no incoming memory in the prompt"
    return found.group(2)


def right(seen: Seen) -> Reply:
    return Reply.of_tool({"action": ANSWERS[incoming(seen)], "reason": "scripted"})


def env_for(url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "EVALLOOP_"))}
    return {**env, "NO_COLOR": "1", "ANTHROPIC_API_KEY": "dummy", "ANTHROPIC_BASE_URL": url}


def run_cli(root: Path, env: dict[str, str]) -> tuple[int, dict]:
    result = subprocess.run([EVALLOOP, "run", "--suite", "similarity", "--engine", "llm", "--no-cache",
                             "--json", "--fail-on-regression"],
                            cwd=root, capture_output=True, text=True, timeout=120, env=env)
    assert "Traceback" not in result.stderr, result.stderr
    return result.returncode, json.loads(result.stdout)


def test_a_200_that_is_not_a_message_invalidates_the_run_and_never_teaches(tmp_path):
    (tmp_path / "fixtures").mkdir()
    (tmp_path / "fixtures" / "similarity.yaml").write_text(
        yaml.safe_dump({**SIMILARITY, "cases": CASES[:5]}, sort_keys=False))
    memories = tmp_path / "history" / "memory.db"
    with LLMServer(lambda seen: Reply.empty_object()) as server:
        env = env_for(server.url)
        # a first run against an API answering 200 {}: invalid and exit 1, not a baseline of 0
        code, doc = run_cli(tmp_path, env)
        assert code == 1 and doc["valid"] is False, doc
        assert re.search(r"5/5 \w+ errored", doc["invalid_reason"])
        assert server.count == 5, "a malformed 200 is not retried"
        first = {s["scorer"]: s for s in doc["scorers"]}["similarity-detection"]
        assert first["errored"] == 5 and first["first_error"].startswith("infrastructure: ")
        assert "not a Messages-API reply: the message has no content list" in first["first_error"]

        server.responder = right
        code, doc = run_cli(tmp_path, env)
        good = {s["scorer"]: s for s in doc["scorers"]}["similarity-detection"]
        assert code == 0 and doc["valid"] and good["current"] == 1.0
        assert good["window_runs"] == 0 and good["baseline"] is None, "the broken run became a baseline"

        # with a baseline of 1.0, an API answering with an HTML page: no regression, no memory
        server.responder = lambda seen: Reply.html()
        code, doc = run_cli(tmp_path, env)
        assert code == 1 and doc["valid"] is False and not doc["regression"], doc
        assert "memories" not in doc
        html = {s["scorer"]: s for s in doc["scorers"]}["similarity-detection"]
        assert "not a Messages-API reply: got '<!doctype html>" in html["first_error"]
    assert not memories.exists() or "eval-failure" not in memories.read_bytes().decode("latin-1")
    with sqlite_conn(tmp_path / "history" / "evalloop.db") as conn:
        rows = conn.execute("select valid, target_failures, infra_failures from runs order by started_at").fetchall()
        failures = conn.execute("select distinct failure from case_results where failure is not null").fetchall()
    assert rows == [(0, 0, 5), (1, 0, 0), (0, 0, 5)]
    assert failures == [("infra",)]


async def test_truncated_json_is_an_infrastructure_fault_too(tmp_path, monkeypatch):
    for name in list(os.environ):
        if name.startswith(("ANTHROPIC_", "EVALLOOP_")):
            monkeypatch.delenv(name)
    with LLMServer(lambda seen: Reply.bad_json()) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "dummy")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        report = await arun_suite(Suite.model_validate({**SIMILARITY, "cases": CASES[:4]}),
                                  RunOptions(engine="llm", cache="off"), settings=load_settings(tmp_path))
    run = report.executed.run
    assert not run.valid and (run.target_failures, run.infra_failures) == (0, 4)
    assert report.executed.summaries["similarity-detection"].errored == 4


async def test_garbled_and_late_model_replies_are_target_failures(tmp_path, monkeypatch):
    ten = CASES[:10]
    garbled, late = ten[3]["input"]["incoming"]["content"], ten[7]["input"]["incoming"]["content"]

    def answer(seen: Seen) -> Reply:
        text = incoming(seen)
        if text == garbled:   # prose instead of the tool call, also after the one retry
            return Reply.of_text("I think these two memories are about the same thing.")
        if text == late:
            return Reply.of_tool({"action": ANSWERS[text], "reason": "late"}, delay=3.0)
        return right(seen)

    for name in list(os.environ):
        if name.startswith(("ANTHROPIC_", "EVALLOOP_")):
            monkeypatch.delenv(name)
    with LLMServer(answer) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "dummy")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        suite = Suite.model_validate({**SIMILARITY, "cases": ten, "timeout": 1})
        report = await arun_suite(suite, RunOptions(engine="llm", cache="off"), settings=load_settings(tmp_path))
    run, executed = report.executed.run, report.executed
    detection = executed.summaries["similarity-detection"]
    assert (detection.n, detection.errored, detection.mean) == (10, 0, pytest.approx(0.8))
    assert run.valid and (run.target_failures, run.infra_failures) == (2, 0)
    assert (executed.target_failures, executed.infra_failures) == (2, 0)
    from evalloop.history import HistoryStore

    store = HistoryStore(load_settings(tmp_path).database_url)
    rows = {c.case_id: c for c in store.case_results(run.id)}
    assert rows[ten[3]["id"]].failure == "target" and "ReplyParseError" in rows[ten[3]["id"]].error
    assert rows[ten[7]["id"]].failure == "target" and "timed out after 1" in rows[ten[7]["id"]].error
    messages = store.case_messages(run.id, "similarity-detection", [ten[3]["id"]])
    assert messages[ten[3]["id"]].startswith("target failure: ")
