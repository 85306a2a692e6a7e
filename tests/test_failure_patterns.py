"""Issue #37 item 8: failure patterns on the command line.

``evalloop failures SUITE`` gives each case's failure history across runs (how often, since when,
which incidents, learn or held out), grouped by pattern, readable at 80 columns and as JSON;
``prompt enhance --query`` ranks the memories by the query (main ignored it); ``memories list``
before anything was learned is an empty list, exit 0 (main: exit 2, "no memory store yet")."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from evalloop.suites.lookup import find_suite
from support.cli import cli

#: answers from ANSWERS.json (case id → answer); "good" when absent
TARGET = '''
import json, os

def answer(input):
    path = os.path.join(os.path.dirname(__file__), "ANSWERS.json")
    answers = json.load(open(path)) if os.path.exists(path) else {}
    return answers.get(input["id"], "good")
'''

N = 20


def project(root: Path) -> Path:
    (root / "fixtures").mkdir(parents=True)
    (root / "sut.py").write_text(TARGET)
    suite = {"name": "answers", "target": "sut:answer", "scorers": ["equals"],
             "cases": [{"id": f"c{i:02d}", "input": {"id": f"c{i:02d}", "question": f"question number {i}"},
                        "expected": "good"} for i in range(N)]}
    (root / "fixtures" / "answers.yaml").write_text(yaml.safe_dump(suite, sort_keys=False))
    return root


def run(root: Path, answers: dict[str, str]) -> int:
    (root / "ANSWERS.json").write_text(json.dumps(answers))
    return cli(root, "run", "-s", "answers").returncode


def test_failures_gives_each_case_its_history_grouped_by_pattern(tmp_path):
    root = project(tmp_path)
    held = find_suite("answers", root).held_out_ids()
    learn = sorted(f"c{i:02d}" for i in range(N) if f"c{i:02d}" not in held)
    x, y, z = learn[:3]
    for _ in range(3):
        assert run(root, {}) == 0
    broken = {c: "bad-x" for c in learn[:8]} | {c: "bad-y" for c in sorted(held)[:2]}
    assert run(root, broken) == 1                                        # a regression: an incident
    assert run(root, {x: "bad-x", y: "bad-x"}) in (0, 1)
    assert run(root, {x: "bad-x", z: "bad-y"}) in (0, 1)
    doc = json.loads(cli(root, "failures", "answers", "--json").stdout)
    assert doc["runs"] == 6
    by_case = {c["case_id"]: (p["pattern"], c) for p in doc["patterns"] for c in p["cases"]}
    pattern, cx = by_case[x]
    assert pattern == "expected good, got bad-x"
    assert (cx["failed"], cx["runs"], cx["failing_now"], cx["streak"], cx["part"]) == (3, 6, True, 3, "learn")
    assert cx["since"] == cx["first_failed"] and len(cx["incidents"]) == 1 and "(open)" in cx["incidents"][0]
    assert by_case[y][1]["failing_now"] is False and by_case[y][1]["failed"] == 2
    assert by_case[z][0] == "expected good, got bad-y" and by_case[z][1]["streak"] == 1  # its latest failure
    for c in sorted(held)[:2]:
        assert by_case[c][1]["part"] == "held-out" and by_case[c][1]["incidents"] == []
    assert set(by_case) == set(broken)
    patterns = [p["pattern"] for p in doc["patterns"]]
    assert patterns[0] == "expected good, got bad-x" and len(patterns) == 2
    now = json.loads(cli(root, "failures", "answers", "--failing", "--json").stdout)
    assert {c["case_id"] for p in now["patterns"] for c in p["cases"]} == {x, z}

    shown = cli(root, "failures", "answers", env={"COLUMNS": "80"})
    assert shown.returncode == 0, shown.stderr
    assert all(len(line) <= 80 for line in shown.stdout.splitlines()), shown.stdout
    words = " ".join(shown.stdout.split())
    assert "expected good, got bad-x (7 cases)" in words and f"{x} (learn): failed 3 of 6 runs" in words
    assert "(3 runs in a row)" in words and "incident " in words
    assert cli(root, "failures", "nope").returncode == 0                 # no run of it: said, not an error


def test_memories_list_before_anything_was_learned_is_empty(tmp_path):
    root = project(tmp_path)
    listed = cli(root, "memories", "list")
    assert listed.returncode == 0 and "no memories found" in listed.stdout, listed.stderr
    assert json.loads(cli(root, "memories", "list", "--json").stdout) == []
    assert json.loads(cli(root, "memories", "find", "anything", "--json").stdout) == []
    (root / "p.md").write_text("Base prompt.\n")
    enhanced = cli(root, "prompt", "enhance", "p.md", "--suite", "answers")
    assert enhanced.returncode == 0 and enhanced.stdout == "Base prompt.\n"
    assert not (root / "history" / "memory.db").exists()                 # reading created nothing


def test_prompt_enhance_query_picks_the_memories_that_match(tmp_path):
    """Two open incidents of one suite (two scorers): a query ranks them (the one it names first),
    and one that matches neither leaves the prompt unchanged."""
    root = project(tmp_path)
    doc = yaml.safe_load((root / "fixtures" / "answers.yaml").read_text())
    doc["scorers"] = ["equals", {"name": "contains", "params": {"text": "good"}}]
    (root / "fixtures" / "answers.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    for _ in range(3):
        assert run(root, {}) == 0
    held = find_suite("answers", root).held_out_ids()
    learn = [f"c{i:02d}" for i in range(N) if f"c{i:02d}" not in held]
    assert run(root, {c: "bad" for c in learn[:10]}) == 1
    listed = json.loads(cli(root, "memories", "list", "--tag", "status:open", "--json").stdout)
    assert {m["metadata"]["scorer"] for m in listed} == {"equals", "contains"}
    (root / "p.md").write_text("Base prompt.\n")
    every = cli(root, "prompt", "enhance", "p.md", "--suite", "answers").stdout
    assert "regression: equals" in every and "regression: contains" in every
    for query, first, second in (("contains regression", "contains", "equals"),
                                 ("equals regression", "equals", "contains")):
        ranked = cli(root, "prompt", "enhance", "p.md", "--suite", "answers", "--query", query).stdout
        assert 0 < ranked.index(f"regression: {first}") < ranked.index(f"regression: {second}")  # best first
        best = cli(root, "prompt", "enhance", "p.md", "--suite", "answers", "--query", query, "--limit", "1")
        assert f"regression: {first}" in best.stdout and f"regression: {second}" not in best.stdout
    nothing = cli(root, "prompt", "enhance", "p.md", "--suite", "answers", "--query", "zebra xylophone")
    assert nothing.stdout == "Base prompt.\n" and "matching 'zebra xylophone'" in nothing.stderr
