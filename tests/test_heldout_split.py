"""Issue #37 item 2: the held-out split is grouped. Cases with the same normalised input or the
same ``group`` are always on one side; near duplicates across the split are reported; a run
lists its held-out ids and ``show`` marks them; a lookup target gains nothing on held-out cases
from the lessons of their learn-side twins (there are none)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from evalloop import load_settings, run_suite
from evalloop.loop.learncheck import acheck
from evalloop.suites.lookup import find_suite
from evalloop.suites.models import Case, Holdout
from evalloop.suites.split import HELD_OUT, near_duplicates, normalised_input, split_cases
from support.cli import cli

#: a pure lookup: the expected answer of a remembered case with this input (case and spaces
#: folded, as the corrections key it), else the healthy answer — or a wrong one while BROKEN exists
LOOKUP = '''
import os, re
from evalloop.learning.feedback import case_key

def answer(input, lesson_records=()):
    for record in lesson_records:
        for c in record["corrections"]:
            if c.get("key") == case_key(input):
                return c["expected"]
    if os.path.exists(os.path.join(os.path.dirname(__file__), "BROKEN")):
        return "unknown"
    return "rack-" + re.search(r"[0-9]+", input).group(0)
'''


def twin_cases(n: int = 20) -> list[dict]:
    """``n`` pairs: the same question twice, the second differing only in case and spaces."""
    out = []
    for i in range(n):
        out.append({"id": f"q{i:02d}", "input": f"Where does service {i} live?", "expected": f"rack-{i}"})
        out.append({"id": f"twin-{i:02d}", "input": f"  WHERE does   Service {i} live?", "expected": f"rack-{i}"})
    return out


def twin_project(root: Path, cases: list[dict] | None = None) -> Path:
    (root / "fixtures").mkdir(parents=True, exist_ok=True)
    (root / "sut.py").write_text(LOOKUP)
    suite = {"name": "twins", "target": "sut:answer", "scorers": ["equals"], "cases": cases or twin_cases()}
    (root / "fixtures" / "twins.yaml").write_text(yaml.safe_dump(suite, sort_keys=False))
    return root


def test_thirty_same_text_pairs_never_straddle_the_split(tmp_path):
    root = twin_project(tmp_path, twin_cases(30))
    # each case alone would straddle: the ids' own hashes put many twins on different sides
    alone = Holdout()
    assert sum(alone.held_out(f"q{i:02d}") != alone.held_out(f"twin-{i:02d}") for i in range(30)) >= 5
    done = cli(root, "run", "-s", "twins", "--json")
    assert done.returncode == 0, done.stderr
    ids = set(json.loads(done.stdout)["held_out"]["ids"])
    assert ids and len(ids) < 60
    for i in range(30):
        assert (f"q{i:02d}" in ids) == (f"twin-{i:02d}" in ids), i
    assert "near-duplicate" not in done.stderr  # twins are grouped, not reported
    suite = find_suite("twins", root)
    suite.validate_cases()                      # the check's pass computes the split (from digests)
    checked = suite.split()
    suite._split = None
    assert suite.split().part_of == checked.part_of and suite.held_out_ids() == ids


def test_the_twin_leak_gives_a_lookup_nothing_on_held_out_cases(tmp_path):
    """Finding 2: 40 cases, each question twice; on main every held-out case had a learn-side twin,
    and a pure lookup 'generalised' +1.000 (p = 0.004) from the twins' corrections."""
    root = twin_project(tmp_path)
    settings_ = load_settings(root)
    for _ in range(3):
        run_suite("twins", settings=settings_)
    (root / "BROKEN").write_text("")
    assert run_suite("twins", settings=settings_).comparison.has_regression
    check = asyncio.run(acheck("twins", settings=settings_))
    none, _, full = check.results
    assert check.held_out >= 6 and none.means["equals"] == 0.0
    assert full.diff["equals"] == 0.0, full.means          # no held-out case has a twin among the lessons
    learn = asyncio.run(acheck("twins", settings=settings_, on="all"))
    assert learn.results[2].diff["equals"] > 0.5            # the lookup works: on learn cases it recalls


def test_a_group_key_and_shared_text_join_cases_transitively():
    cases = [Case(id="a", input="Same text!"), Case(id="b", input="same   text", group="g1"),
             Case(id="c", input="other", group="g1"), Case(id="d", input="OTHER."),
             Case(id="e", input="alone")]
    for salt in map(str, range(40)):  # whatever the draw, the linked four share a side
        split = split_cases(cases, [(HELD_OUT, 0.5), ("learn", 0.5)], salt=salt)
        assert len({split.part_of[c] for c in "abcd"}) == 1
        assert split.group_of["a"] == "g1" and split.group_of["e"] == "e"
    assert normalised_input({"q": "Hello,  World!"}) == normalised_input({"q": "hello world"}) == "q hello world"


def test_held_out_tags_take_their_whole_group_along():
    cases = [Case(id="x1", input="one", tags=["exam"]), Case(id="x2", input="ONE"),
             Case(id="y", input="two", group="k", tags=["exam"]), Case(id="z", input="three", group="k"),
             Case(id="w", input="four")]
    held = Holdout.model_validate({"tags": ["exam"]}).split(cases).ids(HELD_OUT)
    assert held == {"x1", "x2", "y", "z"}


def test_three_parts_from_the_same_function_agree_with_the_held_out_split():
    """#38 needs train / validation / test grouped the same way: its first part is the held-out
    part of a two-part split with the same first fraction and salt."""
    cases = [Case(id=f"c{i}", input=f"text {i % 150}") for i in range(600)]
    two = split_cases(cases, [(HELD_OUT, 0.3), ("learn", 0.7)], salt="s")
    three = split_cases(cases, [("test", 0.3), ("validation", 0.2), ("train", 0.5)], salt="s")
    assert three.ids("test") == two.ids(HELD_OUT)
    sizes = {p: len(three.ids(p)) / 600 for p in three.parts}
    assert 0.15 < sizes["test"] < 0.45 and 0.08 < sizes["validation"] < 0.35
    for ids in three.groups().values():
        assert len({three.part_of[c] for c in ids}) == 1


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 12), st.one_of(st.none(), st.integers(0, 5))), min_size=1, max_size=40),
       st.floats(0.0, 0.99))
def test_linked_cases_share_a_part_and_new_cases_move_only_their_group(rows, fraction):
    cases = [Case(id=f"c{i}", input=f"T {t}", group=None if g is None else f"g{g}") for i, (t, g) in enumerate(rows)]
    split = split_cases(cases, [(HELD_OUT, fraction), ("learn", 1 - fraction)])
    for a in cases:
        for b in cases:
            if a.input == b.input or (a.group is not None and a.group == b.group):
                assert split.part_of[a.id] == split.part_of[b.id]
    unrelated = [*cases, *(Case(id=f"new{i}", input=f"fresh {i}") for i in range(5))]
    again = split_cases(unrelated, [(HELD_OUT, fraction), ("learn", 1 - fraction)])
    assert all(again.part_of[c.id] == split.part_of[c.id] for c in cases)
    if all(c.group is None for c in cases) and len({c.input for c in cases}) == len(cases):
        assert split.ids(HELD_OUT) == Holdout(fraction=fraction).held_out_of([c.id for c in cases])


def near_cases() -> list[dict]:
    """Ports of sixteen services, and one near twin of the first held-out one, on the learn side."""
    names = ["auth", "billing", "search", "gateway", "mailer", "ledger", "queue", "cache", "reports",
             "uploads", "metrics", "scheduler", "payments", "profile", "notify", "audit"]
    cases = [{"id": f"port-{n}", "input": f"The {n} team's dashboard lives at grafana board {i}",
              "expected": f"rack-{i}"} for i, n in enumerate(names)]
    held = Holdout().held_out_of([c["id"] for c in cases])
    first = next(c for c in cases if c["id"] in held)
    twin_id = next(f"near-{k}" for k in range(100) if not Holdout().held_out(f"near-{k}"))
    near = first["input"].replace("dashboard lives", "dashboards live")
    cases.append({"id": twin_id, "input": near, "expected": first["expected"]})  # passes: no floor incident
    return cases


def test_near_duplicates_across_the_split_are_reported_once(tmp_path):
    root = twin_project(tmp_path, near_cases())
    suite = find_suite("twins", root)
    check = near_duplicates(suite.split(), suite.iter_cases())
    assert len(check.pairs) == 1 and check.pairs[0].cosine >= 0.97
    pair = {check.pairs[0].a, check.pairs[0].b}
    checked = cli(root, "suites", "validate", "twins")
    lines = [line for line in checked.stderr.splitlines() if "near-duplicate" in line]
    assert checked.returncode == 0 and len(lines) == 1, checked.stderr
    assert all(c in lines[0] for c in pair) and "group:" in lines[0]
    # a run says it where a lesson is written or read (the check costs an embedder: not on every run)
    for _ in range(3):
        assert "near-duplicate" not in cli(root, "run", "-s", "twins").stderr
    (root / "BROKEN").write_text("")
    done = cli(root, "run", "-s", "twins")
    assert done.returncode == 1 and sum("near-duplicate" in line for line in done.stderr.splitlines()) == 1
    doc = yaml.safe_load((root / "fixtures" / "twins.yaml").read_text())
    for case in doc["cases"]:
        if case["id"] in pair:
            case["group"] = "grafana"
    (root / "fixtures" / "twins.yaml").write_text(yaml.safe_dump(doc))
    assert "near-duplicate" not in cli(root, "suites", "validate", "twins").stderr
    doc["holdout"] = {"near_duplicate": False}
    (root / "fixtures" / "twins.yaml").write_text(yaml.safe_dump(doc))
    assert find_suite("twins", root).near_duplicates() is None


def test_show_marks_the_held_out_cases(tmp_path):
    root = twin_project(tmp_path)
    assert cli(root, "run", "-s", "twins").returncode == 0
    held = find_suite("twins", root).held_out_ids()
    shown = cli(root, "show", "last", env={"COLUMNS": "160"})
    marked = {line.split()[1] for line in shown.stdout.splitlines() if "held out" in line and line.startswith("pass")}
    assert marked == held
    doc = json.loads(cli(root, "show", "last", "--json").stdout)
    assert {c["case_id"] for c in doc["cases"] if c["held_out"]} == held
