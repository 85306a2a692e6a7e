"""Run-level tests of the LLM engine and judges: the real CLI and pipeline, the real anthropic
SDK, and a Messages-API server on loopback scripted to answer the reference operations."""

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
from evalloop.errors import ConfigError
from evalloop.llm.clients import client_from_env
from evalloop.loop.pipeline import arun_suite
from evalloop.suites.models import PACKAGE_FIXTURES, Suite
from support.messages_server import LLMServer, Reply, Seen
from support.sqlitedb import sqlite_conn

EVALLOOP = shutil.which("evalloop") or str(Path(sys.executable).parent / "evalloop")
SIMILARITY = yaml.safe_load((PACKAGE_FIXTURES / "similarity.yaml").read_text(encoding="utf-8"))
ANSWERS = {(c["input"]["existing"]["content"], c["input"]["incoming"]["content"]): c["expected"]["action"]
           for c in SIMILARITY["cases"] if not c.get("expect")}
IN_TOKENS, OUT_TOKENS = 100, 20
HAIKU_CALL_USD = (IN_TOKENS * 1.0 + OUT_TOKENS * 5.0) / 1_000_000   # claude-haiku-4-5 prices


def fenced(text: str, name: str) -> str:
    found = re.search(rf"<<<{name} ([0-9a-f]+)>>>\n(.*?)\n<<<END {name} \1>>>", text, re.DOTALL)
    assert found, f"no {name} in the prompt"
    return found.group(2)


def first_user_text(seen: Seen) -> str:
    """The original question (a parse retry appends messages after it)."""
    return str(seen.body["messages"][0]["content"])


def decide_responder(wrong: set[str] = frozenset()):  # type: ignore[assignment]
    """Answers `decide` as the fixture expects, except for incoming texts in ``wrong``."""

    def answer(seen: Seen) -> Reply:
        assert seen.forced_tool == "decision", seen.forced_tool
        text = seen.last_user_text
        existing, incoming = fenced(text, "EXISTING MEMORY"), fenced(text, "INCOMING MEMORY")
        action = ANSWERS[(existing, incoming)]
        if incoming in wrong:
            action = "CREATE" if action != "CREATE" else "UPDATE"
        return Reply.of_tool({"action": action, "reason": "scripted"},
                             input_tokens=IN_TOKENS, output_tokens=OUT_TOKENS)

    return answer


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "EVALLOOP_"))}
    return {**env, "NO_COLOR": "1", "COLUMNS": "200", **extra}


def cli(cwd: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([EVALLOOP, *args], cwd=cwd, capture_output=True, text=True, timeout=120, env=env)


def llm_env(monkeypatch: pytest.MonkeyPatch, url: str, **extra: str) -> None:
    for name in list(os.environ):
        if name.startswith(("ANTHROPIC_", "EVALLOOP_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", url)
    for name, value in extra.items():
        monkeypatch.setenv(name, value)


def query(root: Path, sql: str, *args: object) -> list[tuple]:
    with sqlite_conn(root / "history" / "evalloop.db") as conn:
        return conn.execute(sql, args).fetchall()


def scorers_of(doc: dict) -> dict[str, dict]:
    return {s["scorer"]: s for s in doc["scorers"]}


# -- the similarity suite on the llm engine, through the console script ----------------------
def test_llm_engine_verdicts_costs_cache_and_replay(tmp_path):
    wrong = {"The user likes the dashboard with a dark theme"}   # dark-mode-preference
    # the first 6 shipped cases as a project suite (a --limit run would never become a baseline)
    (tmp_path / "fixtures").mkdir()
    (tmp_path / "fixtures" / "similarity.yaml").write_text(
        yaml.safe_dump({**SIMILARITY, "cases": SIMILARITY["cases"][:6]}, sort_keys=False))
    with LLMServer(decide_responder(wrong)) as server:
        env = clean_env(ANTHROPIC_API_KEY="test", ANTHROPIC_BASE_URL=server.url)
        args = ("run", "--suite", "similarity", "--engine", "llm", "--json")
        first = cli(tmp_path, *args, env=env)
        assert first.returncode == 0, first.stderr
        doc = json.loads(first.stdout)
        assert server.count == 6
        detection = scorers_of(doc)["similarity-detection"]
        assert detection["current"] == pytest.approx(5 / 6) and detection["n"] == 6
        assert scorers_of(doc)["required-fields"]["current"] == 1.0
        assert doc["llm_calls"] == 6 and doc["cache_hits"] == 0
        assert doc["tokens"] == {"input": 6 * IN_TOKENS, "output": 6 * OUT_TOKENS, "cache_write": 0,
                                 "cache_read": 0}
        assert doc["cost_usd"] == pytest.approx(6 * HAIKU_CALL_USD)
        # the decide prompt is marked for prompt caching, but is far below Haiku 4.5's 4096 tokens
        assert all(seen.cache_marked for seen in server.requests)
        assert first.stderr.count("below the model's minimum cacheable length (4096 tokens)") == 1
        per_case = query(tmp_path, "select sum(cost_usd), sum(input_tokens) from case_results where run_id = ?",
                         doc["run_id"])[0]
        assert per_case[0] == pytest.approx(doc["cost_usd"]) and per_case[1] == 6 * IN_TOKENS
        cache_db = tmp_path / "history" / "llm-cache.db"
        with sqlite_conn(cache_db) as conn:
            assert conn.execute("select count(*) from responses").fetchone()[0] == 6

        again = cli(tmp_path, *args, env=env)
        assert again.returncode == 0, again.stderr
        doc2 = json.loads(again.stdout)
        assert server.count == 6, "an identical run must be served from the cache"
        assert doc2["llm_calls"] == 0 and doc2["cache_hits"] == 6 and doc2["cost_usd"] == 0.0
        detection2 = scorers_of(doc2)["similarity-detection"]
        assert detection2["current"] == pytest.approx(5 / 6)
        assert detection2["baseline"] == pytest.approx(5 / 6) and detection2["window_runs"] == 1

        with sqlite_conn(cache_db) as conn:
            conn.execute("delete from responses where request like '%dark theme%'")
            assert conn.execute("select count(*) from responses").fetchone()[0] == 5
        replay = cli(tmp_path, "run", "--suite", "similarity", "--engine", "llm",
                     "--cache-only", env=env)
        assert server.count == 6, "--cache-only must never call the API"
    assert replay.returncode != 0
    lines = [line for line in replay.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, replay.stderr
    assert "case 'dark-mode-preference'" in lines[0] and "no cached reply" in lines[0]
    assert "Traceback" not in replay.stderr


# -- judges that cannot answer: errored, excluded, and an invalid run is never a baseline -----
def merge_and_judge(malformed: set[str] | bool):
    """Merges by concatenation; the judges grade 80 (one as a tool call, one as text JSON), or
    answer malformed text (twice) for cases whose original is in ``malformed`` (all when True)."""

    def answer(seen: Seen) -> Reply:
        question = first_user_text(seen)
        if seen.forced_tool == "merged":
            merged = f"{fenced(question, 'INCOMING MEMORY')} {fenced(question, 'ORIGINAL MEMORY')}"
            return Reply.of_tool({"content": merged}, input_tokens=IN_TOKENS, output_tokens=OUT_TOKENS)
        assert seen.forced_tool == "judge_verdict", seen.forced_tool
        bad = malformed is True or any(text in question for text in malformed or ())
        if bad:
            return Reply.of_text("The merge looks fine to me, I would give it a good grade.")
        if question.startswith("Rate this memory"):   # the memory judge answers in fenced text JSON
            return Reply.of_text('```json\n{"score": 80, "issues": [], "strengths": ["specific"]}\n```')
        return Reply.of_tool({"score": 80, "issues": [], "strengths": ["complete"]})

    return answer


async def test_errored_judges_are_counted_excluded_and_invalidate_the_run(tmp_path, monkeypatch):
    server = LLMServer().start()
    try:
        llm_env(monkeypatch, server.url)
        settings = load_settings(tmp_path)
        shipped = yaml.safe_load((PACKAGE_FIXTURES / "merge-quality.yaml").read_text(encoding="utf-8"))
        five = {**shipped, "cases": shipped["cases"][:5]}  # whole runs: a --limit run is never a baseline

        async def run_with(responder):
            server.responder = responder
            return await arun_suite(Suite.model_validate(five), RunOptions(engine="llm", cache="off"),
                                    settings=settings)

        one_bad = await run_with(merge_and_judge({"OAuth tokens need a 5min buffer before expiry"}))
        assert server.count == 5 + 4 * 2 + 1 * 2 * 2    # merges, good verdicts, malformed + retry
        first = one_bad.executed.run
        assert first.valid, first.invalid_reason           # 1 of 5 errored is not over 20 %
        for name in ("merge-quality", "memory-quality"):
            summary = one_bad.executed.summaries[name]
            assert (summary.n, summary.errored) == (4, 1)
            assert summary.mean == pytest.approx(0.8)   # the errored 0.5 is not averaged in
        rows = query(tmp_path, "select value, errored, message from case_scores where run_id = ? "
                     "and case_id = 'oauth-buffer-wording' and scorer = 'merge-quality'", first.id)
        assert rows[0][0] == 0.5 and rows[0][1] == 1 and "LLM judge error" in rows[0][2]
        assert one_bad.executed.summaries["must-keep"].mean == 1.0

        all_bad = await run_with(merge_and_judge(True))
        assert not all_bad.executed.run.valid
        assert "merge-quality: 5/5 grades errored" in all_bad.executed.run.invalid_reason
        assert all_bad.executed.summaries["merge-quality"].mean is None

        good = await run_with(merge_and_judge(set()))
        judged = {s.scorer: s for s in good.comparison.scorers}["merge-quality"]
        assert good.executed.run.valid and judged.current == pytest.approx(0.8)
        memory = good.executed.summaries["memory-quality"]
        assert (memory.n, memory.errored, memory.mean) == (5, 0, pytest.approx(0.8))  # text fallback
        assert judged.window_runs == 1 and judged.previous_run == first.id   # the invalid run is skipped
    finally:
        server.stop()


# -- rate limits: retried after retry-after, and the run completes ------------------------------
async def test_rate_limited_calls_are_retried_and_the_run_completes(tmp_path, monkeypatch):
    with LLMServer(decide_responder()) as server:
        server.script(Reply.rate_limited(retry_after=0.05), Reply.rate_limited(retry_after=0.05))
        llm_env(monkeypatch, server.url, EVALLOOP_LLM_MAX_RETRIES="3", EVALLOOP_LLM_BACKOFF="0.01")
        report = await arun_suite("similarity", RunOptions(engine="llm", cache="off", limit=4),
                                  settings=load_settings(tmp_path))
        assert server.count == 4 + 2
    run = report.executed.run
    assert run.status == "completed" and run.valid and run.case_errors == 0
    assert report.executed.summaries["similarity-detection"].mean == 1.0
    assert run.llm_calls == 4


# -- an unreachable server: one line, non-zero exit, a failed run that is never a baseline -----
async def test_unreachable_server_fails_the_run_in_one_line(tmp_path, monkeypatch):
    env = clean_env(ANTHROPIC_API_KEY="test", ANTHROPIC_BASE_URL="http://127.0.0.1:9",
                    EVALLOOP_LLM_MAX_RETRIES="1", EVALLOOP_LLM_BACKOFF="0.01")
    result = cli(tmp_path, "run", "--suite", "similarity", "--engine", "llm", "--limit", "3", env=env)
    assert result.returncode == 1, result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert lines[0].startswith("error:") and "cannot reach the LLM server" in lines[0]
    assert "ANTHROPIC_BASE_URL" in lines[0]
    [(status, valid, reason)] = query(tmp_path, "select status, valid, invalid_reason from runs")
    assert status == "failed" and valid == 0 and "cannot reach" in reason

    with LLMServer(decide_responder()) as server:
        llm_env(monkeypatch, server.url)
        report = await arun_suite("similarity", RunOptions(engine="llm", cache="off", limit=3),
                                  settings=load_settings(tmp_path))
    detection = {s.scorer: s for s in report.comparison.scorers}["similarity-detection"]
    assert detection.window_runs == 0 and detection.baseline is None


# -- the retry and concurrency knobs ---------------------------------------------------------------
def test_env_knobs_reach_the_client(monkeypatch):
    llm_env(monkeypatch, "http://127.0.0.1:9", EVALLOOP_LLM_MAX_RETRIES="2", EVALLOOP_LLM_BACKOFF="0.25",
            EVALLOOP_LLM_CONCURRENCY="32")
    client = client_from_env()
    assert client.policy.max_retries == 2 and client.policy.backoff_base == 0.25
    assert client.concurrency == 32
    monkeypatch.setenv("EVALLOOP_LLM_MAX_RETRIES", "lots")
    with pytest.raises(ConfigError, match="EVALLOOP_LLM_MAX_RETRIES"):
        client_from_env()
