"""A judge change is not a product change (issue #36, finding 7): when only the measurement
changed (here the judge model), the baseline runs' stored outputs are re-graded by the new judge
(a bridge) and the product is compared under one judge; a product regression made in the same
run is still caught; ``--no-bridge`` restarts the baseline instead. Through the real CLI and the
real anthropic SDK against the loopback Messages server, whose two judge models grade the same
answers differently."""

from __future__ import annotations

import json
import os

import pytest
import yaml

from support.cli import cli
from support.messages_server import LLMServer, Reply, Seen

HAIKU, SONNET = "claude-haiku-4-5", "claude-sonnet-4-5"
#: what each judge model gives a right and a wrong answer: the same answers, graded differently
GRADES = {HAIKU: {"RIGHT": 100, "WRONG": 40}, SONNET: {"RIGHT": 75, "WRONG": 20}}
N = 20

TARGET = '''
def answer(input, quality="good"):
    """A right answer, except for every other case when the product is made worse."""
    i = int(input.split()[-1])
    return ("WRONG" if quality == "bad" and i % 2 else "RIGHT") + f" answer {i}"
'''


def judge(seen: Seen) -> Reply:
    verdict = "WRONG" if "WRONG answer" in seen.last_user_text else "RIGHT"
    score = GRADES[seen.body["model"]][verdict]
    return Reply.of_tool({"score": score, "issues": [], "strengths": []}, input_tokens=400, output_tokens=40)


def suite(quality: str = "good") -> dict:
    return {"name": "judged", "target": {"ref": "sut:answer", "params": {"quality": quality}},
            "cases": [{"id": f"c{i:02d}", "input": f"question {i}", "expected": f"answer {i}"} for i in range(N)],
            "scorers": [{"name": "llm-rubric", "params": {"rubric": "Is the answer right?"}}, "contains"]}


@pytest.fixture
def project(tmp_path):
    (tmp_path / "fixtures").mkdir()
    (tmp_path / "sut.py").write_text(TARGET)
    write_suite(tmp_path)
    return tmp_path


def write_suite(root, quality: str = "good") -> None:
    (root / "fixtures" / "judged.yaml").write_text(yaml.safe_dump(suite(quality), sort_keys=False))


@pytest.fixture
def server():
    with LLMServer(judge) as running:
        yield running


def run(root, server, judge_model: str, *args: str):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "EVALLOOP_"))}
    env.update(ANTHROPIC_API_KEY="test", ANTHROPIC_BASE_URL=server.url, PYTHONPATH=str(root),
               EVALLOOP_JUDGE_MODEL=judge_model)
    return cli(root, "run", "--suite", "judged", "--no-cache", *args, env=env)


def judged_by(server, model: str) -> int:
    return sum(1 for s in server.requests if s.body.get("model") == model)


def baseline_under_haiku(root, server) -> None:
    for _ in range(3):
        done = run(root, server, HAIKU)
        assert done.returncode == 0, done.stdout + done.stderr
    assert judged_by(server, HAIKU) == 3 * N


def scorer(doc: dict, name: str = "llm-rubric") -> dict:
    return next(s for s in doc["scorers"] if s["scorer"] == name)


def test_a_judge_model_change_with_an_unchanged_product_is_no_regression(project, server):
    baseline_under_haiku(project, server)
    done = run(project, server, SONNET, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads(done.stdout)
    judge_row = scorer(doc)
    # the same answers, graded 0.75 by the new judge: against the re-graded baseline, no drop
    assert judge_row["current"] == pytest.approx(0.75)
    assert judge_row["baseline"] == pytest.approx(0.75) and judge_row["window_runs"] == 3
    assert judge_row["verdict"] == "steady" and not doc["regression"]
    change = doc["fingerprint_change"]
    assert change["product"] == [] and change["measurement"] == {"llm-rubric": ["model"]}
    assert not change["restarted"]
    bridge = doc["bridge"]
    assert bridge["scorers"] == ["llm-rubric"] and len(bridge["runs"]) == 3
    assert bridge["llm_calls"] == 3 * N and bridge["cost_usd"] > 0
    assert judged_by(server, SONNET) == 4 * N  # the run, and the three baseline runs re-graded
    # the heuristic scorer's measurement did not change: its baseline is its own, not bridged
    assert scorer(doc, "contains")["window_runs"] == 3

    # the terminal says which changed and what the bridge cost
    again = run(project, server, SONNET)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "bridge" not in again.stdout  # bridged once: the next run finds the bridge there
    assert judged_by(server, SONNET) == 5 * N


def test_the_terminal_shows_the_bridged_comparison(project, server):
    baseline_under_haiku(project, server)
    done = run(project, server, SONNET)
    assert done.returncode == 0, done.stdout + done.stderr
    text = " ".join((done.stdout + done.stderr).split())
    assert "measurement changed" in text and "llm-rubric" in text and "model" in text
    assert f"{3 * N} judge calls" in text and "re-graded" in text and "steady" in done.stdout


def test_a_product_regression_in_the_same_run_is_still_caught(project, server):
    baseline_under_haiku(project, server)
    write_suite(project, quality="bad")  # half the answers wrong, and the judge changed too
    done = run(project, server, SONNET, "--json")
    assert done.returncode == 1, done.stdout + done.stderr
    doc = json.loads(done.stdout)
    judge_row = scorer(doc)
    assert judge_row["verdict"] == "regressed"
    assert judge_row["baseline"] == pytest.approx(0.75)  # the old outputs under the new judge
    assert judge_row["current"] == pytest.approx(0.475)
    change = doc["fingerprint_change"]
    assert change["measurement"] == {"llm-rubric": ["model"]}
    assert any(part.startswith("target_params") for part in change["product"])
    assert len(doc["bridge"]["runs"]) == 3


def test_no_bridge_restarts_the_baseline(project, server):
    baseline_under_haiku(project, server)
    done = run(project, server, SONNET, "--json", "--no-bridge")
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads(done.stdout)
    assert scorer(doc)["verdict"] == "no baseline yet" and scorer(doc)["baseline"] is None
    assert doc["fingerprint_change"]["restarted"] and doc["bridge"] is None
    assert judged_by(server, SONNET) == N  # nothing re-graded
    assert scorer(doc, "contains")["window_runs"] == 3  # an unchanged scorer keeps its baseline
    after = run(project, server, SONNET, "--json")
    assert after.returncode == 0, after.stdout + after.stderr
    row = scorer(json.loads(after.stdout))
    assert row["verdict"] == "steady" and row["window_runs"] == 1  # the new judge's own runs only
    assert judged_by(server, SONNET) == 2 * N


def test_the_trend_chart_marks_a_product_change_and_a_measurement_change_apart(project, server):
    baseline_under_haiku(project, server)
    assert run(project, server, SONNET).returncode == 0  # the judge changed
    write_suite(project, quality="bad")
    assert run(project, server, SONNET).returncode == 1  # then the product
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "EVALLOOP_"))}
    shown = cli(project, "report", "--suite", "judged", "--json", "--html", "report.html",
                "--no-fail-on-regression", env=env)
    assert shown.returncode == 0, shown.stderr
    doc = json.loads(shown.stdout)
    points = next(t for t in doc["suites"][0]["scorers"] if t["scorer"] == "llm-rubric")["points"]
    assert len(points) == 5  # the bridges are not runs of the product: not in the trend
    assert [(p["product_changed"] != [], p["measurement_changed"]) for p in points] == [
        (False, []), (False, []), (False, []), (False, ["model"]), (True, [])]
    page = (project / "report.html").read_text()
    # the product's change on both scorers' charts, the judge's on its own only (each chart is
    # drawn twice: for a screen and for a phone)
    assert page.count('<g class="change-measurement">') == 2 and page.count('<g class="change-product">') == 4
    assert page.count('<svg class="chart wide"') == 2 + 1  # two scorers and the latency
    assert "the measurement changed (judge model, rubric, scorer code)" in page
    listed = cli(project, "history", "judged", "--json", env=env)
    assert len(json.loads(listed.stdout)) == 5  # nor in the history's list of runs


def test_outputs_that_were_never_stored_cannot_be_bridged_and_the_baseline_restarts(project, server):
    baseline_under_haiku(project, server)
    (project / "history" / "evalloop.db").unlink()  # a fresh clone: the runs come from the run log, scores only
    done = run(project, server, SONNET, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads(done.stdout)
    assert scorer(doc)["verdict"] == "no baseline yet" and scorer(doc, "contains")["window_runs"] == 3
    assert doc["fingerprint_change"]["restarted"] and doc["fingerprint_change"]["bridged"] == []
    reasons = {r["reason"] for r in doc["bridge"]["unbridged"]}
    assert len(doc["bridge"]["unbridged"]) == 3 and doc["bridge"]["llm_calls"] == 0
    assert reasons == {"its outputs were never stored (imported from the run log, which keeps scores only)"}
    assert any(n.startswith("not bridged: run ") for n in doc["notices"])
    assert judged_by(server, SONNET) == N


def test_the_bridges_stop_at_the_cost_budget_and_say_so(project, server):
    baseline_under_haiku(project, server)
    call = (400 * 3.0 + 40 * 15.0) / 1e6  # one Sonnet 4.5 judge call: 400 tokens in, 40 out
    done = run(project, server, SONNET, "--json", "--concurrency", "1", "--max-cost", f"{30 * call:.6f}")
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads(done.stdout)
    assert doc["valid"] and doc["cost_usd"] == pytest.approx(N * call)  # the run itself: within the budget
    bridge = doc["bridge"]
    assert [r["run"] for r in bridge["runs"]] == [doc["fingerprint_change"]["previous_run"]]  # the newest one
    assert bridge["cost_usd"] <= 30 * call + 1e-9 and bridge["llm_calls"] < 2 * N
    reasons = [r["reason"] for r in bridge["unbridged"]]
    assert reasons[0] == "the cost budget (--max-cost) was spent while it was re-graded"
    assert reasons[1].startswith("not tried: a bridge before it stopped")
    assert scorer(doc)["window_runs"] == 1 and scorer(doc)["verdict"] == "steady"


def test_a_judge_skipped_for_want_of_a_key_is_no_change(project, server):
    assert run(project, server, HAIKU).returncode == 0
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "EVALLOOP_"))}
    keyless = cli(project, "run", "--suite", "judged", "--json", env={**env, "PYTHONPATH": str(project)})
    assert keyless.returncode == 0, keyless.stderr
    assert scorer(json.loads(keyless.stdout))["verdict"] == "skipped"
    done = run(project, server, HAIKU, "--json")
    doc = json.loads(done.stdout)
    assert doc["fingerprint_change"] is None and doc["bridge"] is None
    assert scorer(doc)["window_runs"] == 1 and scorer(doc)["verdict"] == "steady"
