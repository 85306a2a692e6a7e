"""The loop closes: a regression becomes a failure memory that changes the next run's prompt."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from evalloop import load_settings, run_suite
from evalloop.learning import injection
from evalloop.memory.store import MemoryStore

WRAPPER = '''
import os
from evalloop.reference import memory_ops

async def decide(input, ctx=None):
    """The reference decide operation, broken on purpose while BROKEN exists."""
    if os.path.exists(os.path.join(os.path.dirname(__file__), "BROKEN")):
        return {"action": "CREATE", "reason": "always create"}
    return await memory_ops.decide(input, ctx=ctx)

decide.fingerprint = memory_ops.decide.fingerprint
'''

CASES = [
    ("dup-1", "OAuth tokens need 5min buffer", "OAuth tokens need 5min buffer", "NOOP"),
    ("dup-2", "Use pnpm for installs", "Use pnpm for installs", "NOOP"),
    ("para-1", "The deploy runs every Friday", "Deployments happen on Fridays", "UPDATE"),
    ("para-2", "Postgres connection pool max is 20", "The Postgres pool allows at most 20 connections",
     "UPDATE"),
    ("diff-1", "Next.js caching strategies", "OAuth token refresh patterns", "CREATE"),
    ("diff-2", "Apple pie recipe uses cinnamon", "Kubernetes pods restart on OOM", "CREATE"),
]


def make(root: Path) -> Path:
    (root / "fixtures").mkdir(parents=True)
    (root / "sut.py").write_text(WRAPPER)
    suite = {"name": "decisions", "target": {"ref": "sut:decide", "params": {}},
             "scorers": ["similarity-detection"],
             "cases": [{"id": cid, "input": {"existing": {"content": a}, "incoming": {"content": b}},
                        "expected": {"action": act}} for cid, a, b, act in CASES]}
    (root / "fixtures" / "decisions.yaml").write_text(yaml.safe_dump(suite, sort_keys=False))
    return root


def test_regression_becomes_memory_that_changes_the_next_prompt(tmp_path):
    root = make(tmp_path)
    settings = load_settings(root)
    reports = [run_suite("decisions", settings=settings) for _ in range(5)]
    assert {r.comparison.scorers[0].verdict for r in reports[1:]} == {"steady"}
    good_fingerprint = reports[-1].executed.run.fingerprint_hash
    assert len({r.executed.run.fingerprint_hash for r in reports}) == 1
    assert not settings.memory_file.exists()

    (root / "BROKEN").write_text("")
    sixth = run_suite("decisions", settings=settings)
    s = sixth.comparison.scorers[0]
    assert s.is_regression and s.drop > 0.5
    (stored,) = sixth.extras["memories"]
    assert stored["memory_id"] and stored["error"] is None
    assert any("stored failure memory" in n for n in sixth.notices)

    with MemoryStore(settings.memory_file) as store:
        (record,) = store.list(tags=["eval-failure", "suite:decisions", "status:open"])
        assert record.tags == ["eval-failure", "suite:decisions", "scorer:similarity-detection", "status:open"]
        meta = record.metadata
        assert meta["eval_name"] == "decisions" and meta["scorer"] == "similarity-detection"
        assert meta["eval_run_id"] == sixth.executed.run.id
        assert meta["baseline_score"] == pytest.approx(s.baseline)
        assert meta["drop_percentage"] == pytest.approx(s.drop)
        assert {"current_score", "code_version", "timestamp"} <= set(meta)
        assert 'Eval "decisions" regression: similarity-detection' in record.information
        assert "Failing cases" in record.information and "Action:" in record.information
        found = store.find("decisions eval failure", limit=3, tags=["eval-failure"])
        assert found and found[0].record.id == record.id

    prompt = tmp_path / "prompt.md"
    prompt.write_text("Decide NOOP, UPDATE or CREATE.\n")
    enhanced = injection.enhance_prompt(prompt.read_text(), injection.failure_patterns(
        injection.open_adapter(settings), "decisions"))
    assert "Past failure patterns of this task" in enhanced and 'Eval "decisions" regression' in enhanced
    assert "<<<PAST FAILURE " in enhanced

    (root / "BROKEN").unlink()
    seventh = run_suite("decisions", settings=settings)
    assert seventh.executed.run.fingerprint_hash != good_fingerprint
    fp = seventh.executed.run.fingerprint["target_fingerprint"]
    assert fp["operation"] == "decide"
    assert fp["injected"]["memories"] == [record.id]
    assert seventh.executed.run.base_fingerprint == reports[-1].executed.run.base_fingerprint
    # its cases pass again, with the lesson injected: held by the lesson; the ablation that follows
    # (its cases without lessons) passes too, so the product holds without it: resolved
    (held,) = seventh.extras["memories"]
    assert held["action"] == "held" and held["memory_id"] == record.id
    (resolved,) = seventh.extras["ablation"]["memories"]
    assert resolved["action"] == "resolved" and resolved["memory_id"] == record.id
    assert seventh.comparison.fingerprint_change is None
    assert not any("system changed" in n for n in seventh.notices)

    # injection can be switched off: the prompt (and so the fingerprint) is the original again
    off = run_suite("decisions", settings=load_settings(root, inject_failures=False))
    assert off.executed.run.fingerprint_hash == good_fingerprint


def test_cli_memories_and_prompt_enhance(tmp_path):
    root = make(tmp_path)
    exe = str(Path(sys.executable).parent / "evalloop")
    env = {**os.environ, "NO_COLOR": "1"}

    def cli(*args):
        return subprocess.run([exe, *args], cwd=root, capture_output=True, text=True, env=env, timeout=120)

    none = cli("memories", "list", "--tag", "eval-failure")           # nothing learned yet: an empty list
    assert none.returncode == 0 and "no memories found" in none.stdout
    for _ in range(3):
        assert cli("run", "-s", "decisions").returncode == 0
    (root / "BROKEN").write_text("")
    assert cli("run", "-s", "decisions").returncode == 1  # a regression fails the run by default
    listed = json.loads(cli("memories", "list", "--tag", "eval-failure", "--json").stdout)
    assert len(listed) == 1 and listed[0]["tags"][:2] == ["eval-failure", "suite:decisions"]
    found = cli("memories", "find", "decisions similarity eval failure", "--limit", "3")
    assert found.returncode == 0 and "regression: similarity-detection" in found.stdout
    (root / "p.md").write_text("Base prompt.\n")
    enhanced = cli("prompt", "enhance", "p.md", "--suite", "decisions")
    assert enhanced.returncode == 0
    assert enhanced.stdout.startswith("Base prompt.") and "Past failure patterns of this task" in enhanced.stdout
    missing = cli("prompt", "enhance", "nope.md", "--suite", "decisions")
    assert missing.returncode == 2 and "cannot read prompt file" in missing.stderr


def test_a_failing_memory_service_never_fails_the_run(tmp_path):
    root = make(tmp_path)
    settings = load_settings(root, memory_url="http://127.0.0.1:9", memory_http={"timeout": 1.0})
    for _ in range(3):  # enough baseline runs for the drop to be significant
        run_suite("decisions", settings=settings)
    (root / "BROKEN").write_text("")
    report = run_suite("decisions", settings=settings)
    assert report.comparison.has_regression and report.executed.run.status == "completed"
    (item,) = report.extras["memories"]
    assert item["memory_id"] is None and "127.0.0.1:9" in item["error"]
    assert any(n.startswith("failure memory for similarity-detection not stored") for n in report.notices)
    assert any(n.startswith("failure memories not read") for n in report.notices)
