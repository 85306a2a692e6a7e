"""A lesson that holds the product stays until the product holds without it (issue #37, finding 1).

A user's target reads its lessons (a ``lessons`` parameter) in a project made by ``evalloop init``
and run through the real CLI: while ``BROKEN`` exists it answers four learn cases wrong unless the
injected lesson shows the right answer. Before, a pass produced by the lesson resolved the
incident, resolving withdrew the lesson and the next run regressed again: exit codes
``1 0 1 0 …``. Now the first broken run is red, every later run is green with the lesson
injected (the incident is *held by lesson*, checked by an ablation of its cases without lessons
after each run), and once the product is fixed the lesson is retired within three runs.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

import evalloop
from evalloop.learning import lessons as lessons_module
from evalloop.suites.lookup import find_suite
from support.cli import cli

N = 20
BOT = '''
import os
HERE = os.path.dirname(os.path.abspath(__file__))

def answer(input, lessons=""):
    """The FAQ bot: while BROKEN exists, the cases listed in it are answered wrong unless a
    lesson, or its own prompt file, shows the right answer (the lesson holds the product)."""
    n = input["id"].split("-")[1]
    right = f"answer-{n}-zebra"
    path, prompt = os.path.join(HERE, "BROKEN"), os.path.join(HERE, "prompt.md")
    own = open(prompt).read() if os.path.exists(prompt) else ""
    if os.path.exists(path) and input["id"] in open(path).read().split() and right not in lessons + own:
        return f"wrong-{n}-zebra"
    return right
'''


def case(i: int) -> dict:
    return {"id": f"q-{i:02d}", "input": {"id": f"q-{i:02d}", "question": f"question-{i:02d}-zebra"},
            "expected": f"answer-{i:02d}-zebra"}


def init_project(root: Path) -> tuple[Path, list[str]]:
    done = cli(root.parent, "init", str(root))
    assert done.returncode == 0, done.stderr
    (root / "bot.py").write_text(BOT)
    suite = {"name": "faq", "target": "bot:answer", "scorers": ["equals"], "cases": [case(i) for i in range(N)]}
    (root / "fixtures" / "faq.yaml").write_text(yaml.safe_dump(suite, sort_keys=False))
    held = find_suite("faq", root).held_out_ids()
    broken = [c["id"] for c in suite["cases"] if c["id"] not in held][:4]  # learn cases: a lesson may show them
    return root, broken


def lessons_now(root: Path) -> str:
    lessons_module.clear_cache()
    return evalloop.lessons("faq", project_dir=root)


def test_a_lesson_that_holds_the_product_stays_until_the_product_holds_without_it(tmp_path):
    root, broken = init_project(tmp_path / "proj")
    for _ in range(3):
        assert cli(root, "run", "-s", "faq").returncode == 0
    (root / "BROKEN").write_text("\n".join(broken))

    codes, lengths, states = [], [], []
    for _ in range(9):
        done = cli(root, "run", "-s", "faq", "--json")
        codes.append(done.returncode)
        report = json.loads(done.stdout)
        states.append([m["action"] for m in report.get("memories") or []])
        lengths.append(len(lessons_now(root)))
    assert codes == [1] + [0] * 8, (codes, states)                # red once, then green with the lesson
    assert all(n > 0 for n in lengths), lengths                   # the lesson is never withdrawn
    assert states[1] == ["held"], states                          # held by the lesson, not resolved
    text = lessons_now(root)
    assert all(f"answer-{c.split('-')[1]}-zebra" in text for c in broken)
    shown = cli(root, "memories", "list", "--tag", "eval-failure")
    assert "held by lesson" in shown.stdout, shown.stdout

    (root / "BROKEN").unlink()                                    # the product is fixed
    after = []
    for _ in range(3):
        done = cli(root, "run", "-s", "faq", "--json")
        assert done.returncode == 0, done.stderr
        after.append(lessons_now(root))
    assert after[-1] == "", after                                 # retired within three runs
    assert "resolved" in cli(root, "memories", "list", "--tag", "eval-failure").stdout


def test_a_promoted_lesson_is_confirmed_by_a_run_without_it_or_injected_again(tmp_path):
    """``evalloop lessons promote``: the lesson is folded into the prompt, so it is no longer
    injected; a run without it that regresses injects it again, one that passes retires it."""
    root, broken = init_project(tmp_path / "proj")
    for _ in range(3):
        assert cli(root, "run", "-s", "faq").returncode == 0
    (root / "BROKEN").write_text("\n".join(broken))
    assert cli(root, "run", "-s", "faq").returncode == 1
    assert cli(root, "run", "-s", "faq").returncode == 0                 # held by the lesson
    lesson = lessons_now(root)

    done = cli(root, "lessons", "promote", "faq", "--reason", "not folded in after all")
    assert done.returncode == 0 and "promoted" in done.stdout, done.stderr
    assert lessons_now(root) == ""                                       # no longer injected
    assert cli(root, "run", "-s", "faq").returncode == 1                 # the prompt does not hold it
    assert lessons_now(root) == lesson                                   # injected again

    (root / "prompt.md").write_text(lesson)                              # folded into the prompt
    done = cli(root, "lessons", "promote", "faq", "--json")
    assert done.returncode == 0 and [r["was"] for r in json.loads(done.stdout)] == ["open"], done.stdout
    report = json.loads(cli(root, "run", "-s", "faq", "--json").stdout)
    assert [m["action"] for m in report["memories"]] == ["resolved"]     # the prompt holds the product
    assert lessons_now(root) == ""
    assert "nothing to promote" in cli(root, "lessons", "promote", "faq").stdout
