"""The LLM-operation and judge suites that ship: their fixtures, and a fresh machine with no key
running them through the real console script on the local engine, judges skipped."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from evalloop.suites.lookup import find_suite
from support.sqlitedb import sqlite_conn

EVALLOOP = shutil.which("evalloop") or str(Path(sys.executable).parent / "evalloop")
NOTICE = ("no ANTHROPIC_API_KEY (or EVALLOOP_LLM_BASE_URL): memory operations run on the local engine; "
          "LLM judges are skipped")


def cases_of(name: str, tmp_path: Path):
    suite = find_suite(name, tmp_path)
    assert suite.validate_cases() > 0
    return suite, list(suite.iter_cases())


def test_similarity_fixtures_hold_the_adr_cases_and_every_category(tmp_path):
    suite, cases = cases_of("similarity", tmp_path)
    assert suite.target.ref == "evalloop.reference.memory_ops:decide"
    assert [s.name for s in suite.scorers] == ["similarity-detection", "required-fields"]
    by_id = {c.id: c for c in cases}
    adr = by_id["adr-jwt-oauth-paraphrase"]
    assert adr.input["existing"]["content"] == "JWT refresh needs 5 minute buffer before expiry"
    assert adr.input["expectSimilar"] is True and adr.expected == {"action": "UPDATE"}
    assert by_id["adr-nextjs-vs-oauth"].expected == {"action": "CREATE"}
    real = [c for c in cases if not c.expects_fail("similarity-detection")]
    assert len(real) - 2 >= 20
    tags = Counter(t for c in real for t in c.tags)
    assert all(tags[t] >= 4 for t in ("paraphrase", "false-friend", "contradiction", "duplicate"))
    for case in real:   # the action follows from the category, and expectSimilar agrees with it
        wanted = case.expected["action"]
        assert wanted == ("NOOP" if "duplicate" in case.tags else
                          "UPDATE" if {"paraphrase", "contradiction"} & set(case.tags) else "CREATE"), case.id
        if "expectSimilar" in case.input:
            assert case.input["expectSimilar"] == (wanted != "CREATE"), case.id
        same = case.input["existing"]["content"] == case.input["incoming"]["content"]
        assert same == (wanted == "NOOP" and "spacing" not in case.id), case.id


def test_merge_and_quality_fixtures(tmp_path):
    suite, cases = cases_of("merge-quality", tmp_path)
    assert [s.name for s in suite.scorers] == ["merge-quality", "memory-quality", "must-keep"]
    real = [c for c in cases if "control" not in c.tags]
    assert len(real) >= 22 and {"wording", "detail", "updated", "contradiction"} <= {t for c in real for t in c.tags}
    for case in real:   # every fact to keep is in one of the two memories
        both = f"{case.input['original']} {case.input['incoming']}".casefold()
        assert all(str(k).casefold() in both for k in case.expected["keep"]), case.id
    suite, cases = cases_of("memory-quality", tmp_path)
    assert [s.name for s in suite.scorers] == ["quality-label", "llm-rubric"]
    assert "invent none" in suite.scorers[1].params["rubric"]
    labels = Counter(c.expected["quality"] for c in cases if not c.expects_fail("quality-label"))
    assert labels["high"] >= 11 and labels["low"] >= 11


def test_fresh_machine_without_a_key_runs_the_three_suites_locally(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "EVALLOOP_"))}
    result = subprocess.run(
        [EVALLOOP, "run", "--suite", "similarity", "--suite", "merge-quality", "--suite", "memory-quality",
         "--fail-on-regression", "--json-out", "out.json"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, env={**env, "NO_COLOR": "1"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert " ".join(result.stderr.split()).count(NOTICE) == 1   # said once, for all three suites
    assert "Traceback" not in result.stderr
    skipped = [line.strip() for line in result.stdout.splitlines() if "judge skipped" in line]
    assert sorted(line.split(":")[0] for line in skipped) == ["llm-rubric", "memory-quality", "merge-quality"]

    similarity, merge, quality = json.loads((tmp_path / "out.json").read_text())
    detection = {s["scorer"]: s for s in similarity["scorers"]}["similarity-detection"]
    assert 0.6 < detection["current"] < 1.0                     # sensible but imperfect
    assert detection["evidence"]["broken_controls"] == []
    for doc, judges in ((merge, ("merge-quality", "memory-quality")), (quality, ("llm-rubric",))):
        assert doc["regression"] is False and doc["valid"] is True and doc["llm_calls"] == 0
        scorers = {s["scorer"]: s for s in doc["scorers"]}
        for name in judges:   # skipped: not errored, not scored, not compared
            judge = scorers[name]
            assert judge["skipped"] is True and judge["verdict"] == "skipped"
            assert judge["current"] is None and judge["n"] == 0 and judge["errored"] == 0
            assert judge["baseline"] is None and judge["regression"] is False
    assert {s["scorer"]: s for s in merge["scorers"]}["must-keep"]["current"] == pytest.approx(1.0)
    assert 0.6 < {s["scorer"]: s for s in quality["scorers"]}["quality-label"]["current"] < 1.0

    with sqlite_conn(tmp_path / "history" / "evalloop.db") as conn:
        rows = conn.execute("select r.tags, s.value from case_scores s join case_results r "
                            "using (run_id, case_id, epoch) where s.scorer = 'similarity-detection' "
                            "and r.tags not like '%control%'").fetchall()
    duplicates = [value for tags, value in rows if "duplicate" in tags]
    assert len(duplicates) >= 4 and all(v == 1.0 for v in duplicates)
