"""Held-out by default: a suite's cases split by a documented hash of their ids; lessons come
from the learn part only, and no held-out case's input, expected answer or output ever reaches
an injected prompt."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import yaml

from evalloop import RunOptions, load_settings, run_suite
from evalloop.errors import FixtureError
from evalloop.learning import incidents as learning
from evalloop.learning import injection
from evalloop.memory.store import MemoryStore
from evalloop.reference.memory_ops import decide_local
from evalloop.suites.lookup import find_suite
from evalloop.suites.models import Holdout, holdout_bucket, load_suite
from support.messages_server import LLMServer, Reply, Seen, use_only

SERVICES = ["auth", "billing", "search", "gateway", "mailer", "ledger", "queue", "cache", "reports",
            "uploads", "metrics", "scheduler", "payments", "profile", "notify", "audit"]

#: the reference decide; while BROKEN exists its UPDATE cut is out of reach and its reason names the
#: incoming text (so every case's output is its own, and a leak of an output can be found)
WRAPPER = '''
import os
from evalloop.reference import memory_ops

def _broken():
    return os.path.exists(os.path.join(os.path.dirname(__file__), "BROKEN"))

async def decide(input, ctx=None, similar_at=None):
    out = await memory_ops.decide(input, ctx=ctx, similar_at=1.01 if _broken() else similar_at)
    if _broken() and out["action"] == "CREATE":
        out["reason"] = "got-" + input["incoming"]["content"].replace(" ", "_")
    return out

decide.fingerprint = memory_ops.decide.fingerprint
'''


def decision_cases() -> list[dict]:
    out = []
    for i, name in enumerate(SERVICES):
        a = f"The {name} service listens on port {8000 + i} in staging"
        b = f"The {name} service listens on port {9000 + i} in staging"
        out.append({"id": f"port-{name}", "input": {"existing": {"content": a}, "incoming": {"content": b}},
                    "expected": {"action": decide_local(a, b).action, "note": f"exp-{name}"}})
    return out


def make(root: Path, holdout=None) -> Path:
    (root / "fixtures").mkdir(parents=True, exist_ok=True)
    (root / "sut.py").write_text(WRAPPER)
    suite = {"name": "decisions", "target": "sut:decide", "scorers": ["similarity-detection"],
             "cases": decision_cases()}
    if holdout is not None:
        suite["holdout"] = holdout
    (root / "fixtures" / "decisions.yaml").write_text(yaml.safe_dump(suite, sort_keys=False))
    return root


def fields(case: dict) -> list[str]:
    """What of a case must never be injected: its input's texts, its expected note, its output."""
    inp = case["input"]
    return [inp["existing"]["content"], inp["incoming"]["content"], case["expected"]["note"],
            "got-" + inp["incoming"]["content"].replace(" ", "_")]


def held_and_learn(root: Path) -> tuple[list[dict], list[dict]]:
    suite = find_suite("decisions", root)
    held = suite.held_out_ids()
    cases = decision_cases()
    return [c for c in cases if c["id"] in held], [c for c in cases if c["id"] not in held]


def regress(root: Path) -> None:
    settings = load_settings(root)
    for _ in range(3):
        run_suite("decisions", settings=settings)
    (root / "BROKEN").write_text("")
    assert run_suite("decisions", settings=settings).comparison.has_regression




# -- the split ---------------------------------------------------------------------------------
def test_the_split_is_the_documented_hash_of_the_case_id():
    digest = hashlib.sha256(b"port-auth").digest()
    assert holdout_bucket("port-auth") == int.from_bytes(digest[:8], "big") / 2**64
    assert holdout_bucket("port-auth", "v2") == int.from_bytes(hashlib.sha256(b"v2port-auth").digest()[:8],
                                                               "big") / 2**64
    ids = [f"case-{i}" for i in range(4000)]
    held = [c for c in ids if Holdout().held_out(c)]
    assert 0.27 < len(held) / len(ids) < 0.33                     # default 0.3
    more = ids + [f"new-{i}" for i in range(1000)]                # adding cases moves no case across
    assert [c for c in more if Holdout().held_out(c)][: len(held)] == held
    assert not any(Holdout(fraction=0).held_out(c) for c in ids)
    for fraction, salt in ((0.3, ""), (0.05, "v2"), (0.999, "é")):  # the held-out set is the bucket's rule
        split = Holdout(fraction=fraction, salt=salt)
        assert split.held_out_of(ids) == {c for c in ids if holdout_bucket(c, salt) < fraction}
    by_tag = Holdout.model_validate({"tags": ["held-out"]})
    assert by_tag.held_out("x", ["held-out"]) and not by_tag.held_out("x", ["other"])
    assert Holdout.model_validate(0.5).fraction == 0.5 and Holdout.model_validate("a, b").tags == ["a", "b"]


def test_a_suite_file_names_its_split(tmp_path):
    make(tmp_path, holdout={"tags": ["exam"]})
    doc = yaml.safe_load((tmp_path / "fixtures" / "decisions.yaml").read_text())
    doc["cases"][0]["tags"] = ["exam"]
    (tmp_path / "fixtures" / "decisions.yaml").write_text(yaml.safe_dump(doc))
    assert load_suite(tmp_path / "fixtures" / "decisions.yaml").held_out_ids() == {"port-auth"}
    doc["holdout"] = 1.5
    (tmp_path / "fixtures" / "decisions.yaml").write_text(yaml.safe_dump(doc))
    with pytest.raises(FixtureError, match="holdout"):
        load_suite(tmp_path / "fixtures" / "decisions.yaml")


# -- no held-out case in a lesson ---------------------------------------------------------------
def test_no_held_out_case_reaches_a_memory_or_a_prompt_of_the_shipped_operations(tmp_path, monkeypatch):
    root = make(tmp_path)
    held, learn = held_and_learn(root)
    assert held and learn and sum(c["expected"]["action"] == "UPDATE" for c in held) >= 2
    regress(root)
    settings = load_settings(root)
    with MemoryStore(settings.memory_file) as store:
        (memory,) = learning.incidents(store, "decisions")
    stored = memory.information + json.dumps(memory.metadata)
    for case in held:
        assert case["id"] not in memory.metadata["failing_cases"]
        assert not [f for f in fields(case) if f in stored], case["id"]
    assert any(f in memory.information for case in learn for f in fields(case))  # the grep can find a leak

    injected, notice = injection.injected_for(settings, find_suite("decisions", root))
    assert notice is None and injected.text
    prompts: list[str] = [injected.text]

    def answer(s: Seen) -> Reply:
        prompts.append(s.system_text)
        return Reply.of_tool({"action": "CREATE", "reason": "scripted"})

    with LLMServer(answer) as server:
        use_only(server, monkeypatch)
        report = run_suite("decisions", RunOptions(engine="llm", cache="off"), settings=load_settings(root))
    assert len(prompts) == len(decision_cases()) + 1
    assert all("Past failure patterns" in p for p in prompts[1:])
    for case in held:
        for prompt in prompts:
            assert not [f for f in fields(case) if f in prompt], case["id"]
    # the local engine reads the structured corrections: learn cases only
    assert {c["id"] for c in memory.metadata["corrections"]} <= {c["id"] for c in learn}
    part = report.extras["held_out"]
    assert part["n"] == len(held) and part["of"] == len(decision_cases()) and part["split"] == "fraction 0.3"


def test_an_incident_written_before_the_split_is_not_injected_until_rewritten(tmp_path):
    root = make(tmp_path, holdout=0)                      # no split: every case may be remembered
    regress(root)
    make(root)                                            # now the default split
    held, _ = held_and_learn(root)
    settings = load_settings(root)
    suite = find_suite("decisions", root)
    with MemoryStore(settings.memory_file) as store:
        (old,) = learning.incidents(store, "decisions")
    assert set(old.metadata["failing_cases"]) & {c["id"] for c in held}
    injected, _ = injection.injected_for(settings, suite)
    assert injected.text is None and injected.skipped == [old.id]
    again = run_suite("decisions", settings=settings)   # still broken: the incident is rewritten
    assert any("not injected" in n and "held-out" in n for n in again.notices)
    with MemoryStore(settings.memory_file) as store:
        (new,) = learning.incidents(store, "decisions")
    assert new.id == old.id and not set(new.metadata["failing_cases"]) & {c["id"] for c in held}
    for case in held:
        assert not [f for f in fields(case) if f in new.information]
    injected, _ = injection.injected_for(settings, suite)
    assert injected.text and injected.memory_ids == [old.id]


def test_runs_report_the_held_out_score_and_a_verdict_on_it_alone(tmp_path):
    from support.cli import cli

    root = make(tmp_path)
    held, _ = held_and_learn(root)
    for _ in range(3):
        assert cli(root, "run", "-s", "decisions", env={"COLUMNS": "160"}).returncode == 0
    (root / "BROKEN").write_text("")
    whole = cli(root, "run", "-s", "decisions", env={"COLUMNS": "160"})
    assert f"held-out cases ({len(held)} of {len(decision_cases())}, never in a lesson)" in whole.stdout
    part = cli(root, "run", "-s", "decisions", "--held-out", "--json", env={"EVALLOOP_INJECT_FAILURES": "0"})
    assert part.returncode == 1, part.stderr                             # without its lessons: regressed
    doc = json.loads(part.stdout)
    assert {c["case_id"] for c in doc["cases"]} == {c["id"] for c in held}
    assert doc["scorers"][0]["verdict"] == "regressed" and doc["held_out"]["n"] == len(held)
    # with the lessons of the learn cases, the local engine's rule gets the held-out cases right
    taught = json.loads(cli(root, "run", "-s", "decisions", "--held-out", "--json").stdout)
    assert taught["scorers"][0]["current"] == 1.0 and taught["scorers"][0]["verdict"] == "steady"
