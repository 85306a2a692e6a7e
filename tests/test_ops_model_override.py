"""The model is chosen per suite (target params) and per judge (scorer params), and priced."""

from __future__ import annotations

import pytest
import yaml

from evalloop import RunOptions, load_settings, run_suite
from support.messages_server import LLMServer, Reply


@pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")
def test_suite_and_judge_models_reach_the_api_and_the_fingerprint(tmp_path, monkeypatch):
    (tmp_path / "fixtures").mkdir()
    suite = {
        "name": "merges",
        "target": {"ref": "evalloop.reference.memory_ops:merge", "params": {"model": "claude-sonnet-4-5"}},
        "scorers": [{"name": "merge-quality", "params": {"model": "judge-model-x"}}],
        "cases": [{"id": "a", "input": {"original": "Pool max is 20", "incoming": "Pool max is 30"}}],
    }
    (tmp_path / "fixtures" / "merges.yaml").write_text(yaml.safe_dump(suite))
    (tmp_path / "evalloop.toml").write_text('[prices]\n"judge-model-x" = [2.0, 10.0]\n')

    def answer(seen):
        if seen.forced_tool == "merged":
            return Reply.of_tool({"content": "Pool max is 30 (was 20)."}, input_tokens=100, output_tokens=10)
        return Reply.of_tool({"score": 90, "issues": [], "strengths": ["kept both"]},
                             input_tokens=200, output_tokens=20)

    with LLMServer(answer) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        report = run_suite("merges", RunOptions(engine="llm", cache="off"), settings=load_settings(tmp_path))
        models = sorted(seen.body["model"] for seen in server.requests)
    assert models == ["claude-sonnet-4-5", "judge-model-x"]
    fingerprint = report.executed.run.fingerprint["target_fingerprint"]
    assert fingerprint["model"] == "claude-sonnet-4-5" and fingerprint["engine"] == "llm"
    assert report.executed.summaries["merge-quality"].mean == 0.9
    sonnet = (100 * 3.0 + 10 * 15.0) / 1e6
    judge = (200 * 2.0 + 20 * 10.0) / 1e6
    assert abs(report.executed.run.cost_usd - (sonnet + judge)) < 1e-12
