"""Lessons reach any target: a user's own target that names a ``lessons`` (or ``lesson_records``)
parameter receives the suite's open incidents, fenced and within the budget, and
``evalloop.lessons(suite, project_dir=…)`` returns the same text to the system's own code — in a
project made with ``evalloop init``, run through the CLI. No held-out case ever reaches either."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import yaml

import evalloop
from evalloop.history.store import HistoryStore
from evalloop.learning import lessons as lessons_module
from evalloop.suites.lookup import find_suite
from support.cli import cli

N = 20
BOT = '''
import json, os
HERE = os.path.dirname(os.path.abspath(__file__))

def answer(input, lessons="", lesson_records=None):
    """The FAQ bot: right answers, unless BROKEN exists. It logs what lessons it was given."""
    with open(os.path.join(HERE, "received.jsonl"), "a") as f:
        f.write(json.dumps({"case": input["id"], "lessons": lessons, "records": lesson_records}) + "\\n")
    n = input["id"].split("-")[1]
    if os.path.exists(os.path.join(HERE, "BROKEN")):
        return f"wrong-{n}-zebra"
    return f"answer-{n}-zebra"
'''


def case(i: int) -> dict:
    return {"id": f"q-{i:02d}", "input": {"id": f"q-{i:02d}", "question": f"question-{i:02d}-zebra"},
            "expected": f"answer-{i:02d}-zebra"}


def fields(c: dict) -> list[str]:
    n = c["id"].split("-")[1]
    return [c["input"]["question"], c["expected"], f"wrong-{n}-zebra"]


def init_project(root: Path) -> Path:
    done = cli(root.parent, "init", str(root))
    assert done.returncode == 0, done.stderr
    (root / "bot.py").write_text(BOT)
    suite = {"name": "faq", "target": "bot:answer", "scorers": ["equals"], "cases": [case(i) for i in range(N)]}
    (root / "fixtures" / "faq.yaml").write_text(yaml.safe_dump(suite, sort_keys=False))
    return root


def received(root: Path) -> list[dict]:
    path = root / "received.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    path.unlink(missing_ok=True)
    return rows


def test_a_user_target_receives_lessons_and_the_api_returns_the_same(tmp_path, caplog):
    root = init_project(tmp_path / "proj")
    for _ in range(3):
        assert cli(root, "run", "-s", "faq").returncode == 0
    assert {r["lessons"] for r in received(root)} == {""}                 # nothing learned yet
    (root / "BROKEN").write_text("")
    broken = cli(root, "run", "-s", "faq")
    assert broken.returncode == 1 and "stored failure memory" in broken.stderr, broken.stderr
    received(root)

    again = cli(root, "run", "-s", "faq", "--json")                         # the next run gets the lessons
    rows = received(root)
    assert len(rows) == N
    text = rows[0]["lessons"]
    assert text.startswith("Past failure patterns") and "<<<PAST FAILURE " in text
    assert all(r["lessons"] == text for r in rows)
    (record,) = rows[0]["records"]
    assert record["scorer"] == "equals" and record["failing_cases"] and record["text"] in text

    held = find_suite("faq", root).held_out_ids()
    cases = [case(i) for i in range(N)]
    assert held and len(held) < N
    for c in cases:
        leaked = [f for f in fields(c) if f in text or f in json.dumps(rows[0]["records"])]
        if c["id"] in held:
            assert not leaked, c["id"]                                      # never a held-out case
    assert any(f in text for c in cases if c["id"] not in held for f in fields(c))

    run_id = json.loads(again.stdout)["run_id"]
    fp = HistoryStore(f"sqlite:///{root / 'history' / 'evalloop.db'}").get_run(run_id).fingerprint
    assert fp["target_fingerprint"]["injected"]["memories"] == [record["id"]]

    lessons_module.clear_cache()
    assert evalloop.lessons("faq", project_dir=root, wait=60) == text       # the same text at serving time
    assert lessons_module._slots                                            # and cached

    # never raises: a broken store, a missing suite, a missing project give "" and a warning
    lessons_module.clear_cache()
    (root / "history" / "memory.db").write_bytes(b"not a database at all" * 100)
    with caplog.at_level(logging.WARNING, logger="evalloop.lessons"):
        assert evalloop.lessons("faq", project_dir=root, wait=60) == ""
        assert evalloop.lessons("nope", project_dir=root, wait=60) == ""
        assert evalloop.lessons("faq", project_dir=tmp_path / "missing", wait=60) == ""
    assert len([r for r in caplog.records if r.name == "evalloop.lessons"]) == 3


def test_lessons_in_a_project_that_never_learned(tmp_path, caplog):
    root = init_project(tmp_path / "proj")
    lessons_module.clear_cache()
    with caplog.at_level(logging.WARNING, logger="evalloop.lessons"):
        assert evalloop.lessons("faq", project_dir=root) == ""
    assert "no memory store yet" in caplog.text
    assert not (root / "history" / "memory.db").exists()                   # reading creates nothing
