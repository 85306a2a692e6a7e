"""`evalloop calibrate` against a noisy judge on the loopback Messages-API server."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from support.messages_server import LLMServer, Reply
from support.sqlitedb import sqlite_conn

SUITE = {
    "name": "judged",
    "target": "sut:answer",
    "scorers": [{"name": "llm-rubric", "params": {"rubric": "The answer names a colour."}}, "json-valid"],
    "cases": [{"id": f"c{i}", "input": {"i": i}} for i in range(12)],
}


def test_calibrate_measures_judge_noise_and_replays_from_cache(tmp_path):
    (tmp_path / "fixtures").mkdir()
    (tmp_path / "fixtures" / "judged.yaml").write_text(yaml.safe_dump(SUITE))
    (tmp_path / "sut.py").write_text("def answer(input):\n    return {'colour': 'blue', 'i': input['i']}\n")
    counter = itertools.count()

    def noisy(seen):  # a judge whose grade of the same output wobbles from call to call
        k = next(counter)
        return Reply.of_tool({"score": 50 + (k * 37) % 41 - 20, "issues": [], "strengths": ["ok"]})

    exe = str(Path(sys.executable).parent / "evalloop")
    with LLMServer(noisy) as server:
        env = {**os.environ, "ANTHROPIC_API_KEY": "test", "ANTHROPIC_BASE_URL": server.url, "NO_COLOR": "1"}
        args = [exe, "calibrate", "--suite", "judged", "--repeats", "5", "--json"]
        first = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120)
        assert first.returncode == 0, first.stderr
        calls = server.count
        assert calls == 12 * 5
        second = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120)
        assert second.returncode == 0 and server.count == calls  # replayed from the cache
    rows = {r["scorer"]: r for r in json.loads(first.stdout)}
    judge = rows["llm-rubric"]["calibration"]
    assert judge["repeats"] == 5 and judge["n_cases"] == 12 and judge["noise_sd"] > 0.05
    assert len(judge["per_case_variance"]) == 12
    assert 0 < judge["suggested_threshold"] < 1 and judge["minimal_detectable_drop"] > 0
    assert rows["json-valid"]["calibration"] is None
    assert rows["json-valid"]["minimal_detectable_drop"] is not None
    assert json.loads(second.stdout)[0]["calibration"] == judge


    with sqlite_conn(tmp_path / "history" / "evalloop.db") as conn:
        stored = conn.execute("select scorer, repeats, n_cases from calibrations").fetchall()
    assert stored == [("llm-rubric", 5, 12), ("llm-rubric", 5, 12)]


def test_calibrate_without_an_llm_says_the_judge_was_skipped(tmp_path):
    (tmp_path / "fixtures").mkdir()
    (tmp_path / "fixtures" / "judged.yaml").write_text(yaml.safe_dump(SUITE))
    (tmp_path / "sut.py").write_text("def answer(input):\n    return {'colour': 'blue'}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "EVALLOOP_LLM"))}
    exe = str(Path(sys.executable).parent / "evalloop")
    result = subprocess.run([exe, "calibrate", "-s", "judged", "--json"], cwd=tmp_path, capture_output=True,
                            text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    rows = {r["scorer"]: r for r in json.loads(result.stdout)}
    assert rows["llm-rubric"]["calibration"] is None and "judge skipped" in rows["llm-rubric"]["note"]
    assert "local engine" in result.stderr
