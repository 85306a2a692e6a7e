"""``evalloop prompt revise`` on GEPA, through the CLI on the loopback Messages server: a task model
that follows the rules its system prompt states, and a reflecting model that is a function of the
reflection prompt it receives — it finds a lost rule only from a failure it is shown
(:mod:`support.revision`)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import tempfile
import threading
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalloop.config import load_settings
from evalloop.learning.revisions import Confirmation, Ledger, RevisionRecord
from evalloop.loop.gepa_adapter import REFLECT_SYSTEM
from evalloop.loop.revise_plan import alpha_for, revision_splits
from evalloop.suites.lookup import find_suite
from support.cli import EVALLOOP, cli
from support.messages_server import LLMServer, Reflecting, Seen
from support.revision import (
    BROKEN,
    GOOD,
    RULE_DUP,
    RULE_SAME,
    cases,
    coin,
    current_prompt,
    finding,
    make,
    rewording,
    shown_cases,
    task,
)

MARKER = REFLECT_SYSTEM[:60]


def env_for(server: LLMServer) -> dict[str, str]:
    return {"ANTHROPIC_API_KEY": "test", "ANTHROPIC_BASE_URL": server.url, "COLUMNS": "160"}


def revise(root: Path, *args: str, env: dict[str, str]) -> tuple[dict, str]:
    done = cli(root, "prompt", "revise", "prompts/decide.md", "-s", "decisions", "--json", *args, env=env, timeout=280)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), done.stderr


def pair_of(seen: Seen) -> tuple[str, str] | None:
    """The case a task request is about: its (A, B) texts."""
    found = re.findall(r"^[AB]: (.*)$", seen.last_user_text, re.M)
    return (found[0], found[1]) if len(found) == 2 else None


def incident_of(root: Path, memory_id: str):
    from evalloop.learning import injection

    adapter = injection.open_adapter(load_settings(root))
    try:
        return next(r for r in adapter.list(limit=50) if r.id == memory_id)
    finally:
        injection.close_adapter(adapter)


# -- the splits ---------------------------------------------------------------------------------------

def test_the_test_split_is_the_held_out_split_and_train_and_validation_divide_the_learn_cases(tmp_path):
    extra = [{"id": f"twin-{i}-{side}", "input": {"a": f"Twin text {i}", "b": "same"}, "expected": "CREATE"}
             for i in range(12) for side in "xy"]                                  # same text: one group
    extra += [{"id": f"grp-{i}-{side}", "input": {"a": f"Grouped {i} {side}", "b": "x"}, "expected": "CREATE",
               "group": f"g{i}"} for i in range(12) for side in "xy"]               # same group key
    extra += [{"id": "control", "input": {"a": "x", "b": "y"}, "expected": "CREATE", "expect": "fail"}]
    make(tmp_path, suite_cases=cases() + extra)
    suite = find_suite("decisions", tmp_path)
    splits = revision_splits(suite, 0.4)
    every = [c.id for c in suite.iter_cases() if c.id != "control"]
    assert set(splits.test) == suite.held_out_ids() - {"control"}                 # test = held out
    assert set(splits.train) | set(splits.validation) == set(every) - set(splits.test)  # the learn cases
    assert not set(splits.train) & set(splits.validation) and not set(splits.train) & set(splits.test)
    assert "control" not in splits.train + splits.validation + splits.test      # a control grades no prompt
    part = {c: name for name in ("train", "validation", "test") for c in getattr(splits, name)}
    for i in range(12):
        assert part[f"twin-{i}-x"] == part[f"twin-{i}-y"] and part[f"grp-{i}-x"] == part[f"grp-{i}-y"]
    learn = len(splits.train) + len(splits.validation)
    assert 0.25 < len(splits.validation) / learn < 0.55

    tagged = cases()[:40]
    for c in tagged[:10]:
        c["tags"] = ["held-out"]
    make(tmp_path / "tags", suite_cases=tagged)
    (tmp_path / "tags" / "fixtures" / "decisions.yaml").write_text(yaml.safe_dump(
        {**yaml.safe_load((tmp_path / "tags" / "fixtures" / "decisions.yaml").read_text()),
         "holdout": {"tags": ["held-out"]}}))
    by_tags = revision_splits(find_suite("decisions", tmp_path / "tags"), 0.4)
    assert set(by_tags.test) == {c["id"] for c in tagged[:10]} and by_tags.train and by_tags.validation


def test_each_use_of_a_test_split_is_confirmed_at_a_smaller_level_and_the_levels_sum_to_alpha(tmp_path):
    assert [alpha_for(k, 0.05) for k in (1, 2, 3)] == pytest.approx([0.025, 0.05 / 6, 0.05 / 12])
    assert sum(alpha_for(k, 0.05) for k in range(1, 10_000)) < 0.05              # any number of revisions
    ledger = Ledger(tmp_path, "s")
    test = [f"c{i}" for i in range(10)]
    confirmed = Confirmation(n=10, current=0.5, candidate=0.6, gain=0.1, p_value=0.3, alpha=0.025, better=False)
    ledger.append(RevisionRecord(suite="s", prompt_file="p", start="failing cases", before_sha="a",
                                 test_ids=test, confirmation=confirmed))
    ledger.append(RevisionRecord(suite="s", prompt_file="p", start="failing cases", before_sha="a"))  # not confirmed
    ledger.append(RevisionRecord(suite="s", prompt_file="p", start="failing cases", before_sha="a",
                                 test_ids=[f"new{i}" for i in range(10)], confirmation=confirmed))
    assert ledger.uses(test) == 1                                                 # only confirmations on these cases
    assert ledger.uses(test[:6] + ["n1", "n2", "n3", "n4"]) == 1                  # mostly the same cases: a reuse
    assert ledger.uses([f"fresh{i}" for i in range(10)]) == 0


# -- end to end ---------------------------------------------------------------------------------------

def test_revise_finds_the_lost_rules_from_an_incident_and_the_written_prompt_is_better_on_fresh_cases(tmp_path):
    root = make(tmp_path, prompt=GOOD)
    model = Reflecting(finding, task, MARKER)
    with LLMServer(model) as server:
        env = env_for(server)
        for _ in range(3):
            assert cli(root, "run", "-s", "decisions", env=env).returncode == 0
        (root / "prompts" / "decide.md").write_text(BROKEN)                       # someone loses both rules
        broken = cli(root, "run", "-s", "decisions", env=env)
        assert broken.returncode == 1 and "stored failure memory" in broken.stderr, broken.stderr
        incident = re.search(r"stored failure memory (\S+)", broken.stderr).group(1)

        result, said = revise(root, "--write", "--max-metric-calls", "150", env=env)

    # the plan came first, with the power of the test split; the spend was printed as it went
    assert said.index("minimum detectable effect") < said.index("search: iteration 1 ")
    assert re.search(r"search: iteration \d+ · \d+/150 metric calls · \$0\.\d+", said)
    assert result["start"] == "incident" and result["incidents"] == [incident]
    assert result["power"]["source"].startswith("run ")                          # the last run's held-out scores

    # GEPA searched: a population, a frontier, within the budget; both rules found from failures shown
    search = result["search"]
    assert search["candidates"] >= 3 and search["frontier"] >= 1 and search["reflections"] >= 2
    assert search["metric_calls"] <= 150 and search["stopped"] == "a perfect validation score"
    text = (root / "prompts" / "decide.md").read_text()
    assert RULE_SAME in text and RULE_DUP in text and result["written"] == "prompts/decide.md"
    shown = [case for prompt in model.prompts for case in shown_cases(prompt)]
    assert any(c["expected"] != c["got"] for c in shown)                          # failures, with what was expected
    assert all("<<<PAST FAILURE " in p for p in model.prompts)                   # the incident's lesson, fenced
    # a later reflection improved a candidate, on that candidate's own failures (one rule found already)
    assert any(current_prompt(p).count("RULE:") == 1 for p in model.prompts)

    # confirmed once on the test split, better, with its interval
    confirmation = result["confirmation"]
    assert confirmation["better"] and confirmation["gain"] > 0.5 and confirmation["p_value"] < 0.025
    assert confirmation["n"] == len(find_suite("decisions", root).held_out_ids())
    assert confirmation["low"] > 0 and confirmation["alpha"] == pytest.approx(0.025)

    # the record: printed, beside the prompt, in the ledger and with the incident
    beside = json.loads((root / "prompts" / "decide.md.revision.json").read_text())
    ledger = json.loads((root / "history" / "revisions" / "decisions.jsonl").read_text().splitlines()[-1])
    for record in (beside, ledger):
        assert RULE_SAME in record["diff"] and record["confirmation"]["gain"] == confirmation["gain"]
        assert record["metric_calls"] == search["metric_calls"] and record["cost_usd"] > 0
        assert record["salt"] == "" and record["splits"]["test"] == confirmation["n"]
    assert incident_of(root, incident).metadata["revisions"][-1]["confirmation"]["gain"] == confirmation["gain"]
    assert result["stored_with"] == [incident]
    assert result["promoted"] == [incident]                                     # folded in: no longer injected

    # the next run passes without the lesson; the incident moves on and keeps its record
    with LLMServer(Reflecting(finding, task, MARKER)) as server:
        assert cli(root, "run", "-s", "decisions", env=env_for(server)).returncode == 0
    after = incident_of(root, incident)
    assert after.metadata["status"] != "open" and after.metadata["revisions"][-1]["written"] == "prompts/decide.md"

    # better on fresh cases it never saw: the old prompt and the written one, side by side
    fresh = cases(prefix="fresh-", start=500, same=12, dup=6, other=6)
    (root / "prompts" / "old.md").write_text(BROKEN)
    make(root, suite_cases=fresh, name="fresh-new")
    make(root, suite_cases=fresh, name="fresh-old", prompt_path="prompts/old.md")
    with LLMServer(Reflecting(finding, task, MARKER)) as server:
        means = {}
        for name in ("fresh-new", "fresh-old"):
            done = cli(root, "run", "-s", name, "--json", "--no-fail-on-regression", env=env_for(server))
            means[name] = json.loads(done.stdout)["scorers"][0]["current"]
    assert means["fresh-new"] == 1.0 and means["fresh-old"] < 0.5


def test_revise_starts_from_failing_cases_and_never_shows_the_test_split_to_the_search(tmp_path):
    root = make(tmp_path)                                                          # no run, no incident
    model = Reflecting(finding, task, MARKER)
    with LLMServer(model) as server:
        result, _ = revise(root, "--max-metric-calls", "150", env=env_for(server))
        requests = list(server.requests)
    assert result["start"] == "failing cases" and result["incidents"] == []
    assert result["written"] == "prompts/decide.md.revised"                        # without --write, beside it
    assert (root / "prompts" / "decide.md").read_text() == BROKEN
    assert RULE_SAME in (root / "prompts" / "decide.md.revised").read_text()

    suite = find_suite("decisions", root)
    test = {c.id: c for c in suite.iter_cases() if c.id in set(result["splits"]["test"])}
    assert set(test) == suite.held_out_ids()
    final = (root / "prompts" / "decide.md.revised").read_text()
    seen_with: dict[tuple[str, str], list[str]] = {}
    for seen in requests:
        pair = pair_of(seen)
        if pair is not None:
            seen_with.setdefault(pair, []).append(seen.system_text)
    for case in test.values():                                                     # only in the confirmation:
        systems = seen_with[(case.input["a"], case.input["b"])]
        assert sorted(systems) == sorted([BROKEN, final])                          # the current prompt, the final one
    for prompt in model.prompts:                                                   # and never to the reflecting model
        assert not {c["id"] for c in shown_cases(prompt)} & set(test)
        for case in test.values():
            assert case.input["a"] not in prompt
    trained = {(c.input["a"], c.input["b"]) for c in suite.iter_cases() if c.id in set(result["splits"]["validation"])}
    assert any(len(set(seen_with[p])) > 2 for p in trained)                       # several candidates on validation


def test_dry_run_says_what_the_test_split_can_detect_before_anything_is_spent(tmp_path):
    root = make(tmp_path)
    with LLMServer(Reflecting(finding, task, MARKER)) as server:
        result, said = revise(root, "--dry-run", "--min-gain", "0.05", env=env_for(server))
        assert server.count == 0
    power = result["power"]
    assert power["use"] == 1 and power["alpha"] == pytest.approx(0.025) and 0.05 < power["mde"] < 0.5
    assert "minimum detectable effect" in said and "warning: the test split is too small" in said
    assert result["search"] is None and result["outcome"].startswith("plan only")
    assert not (root / "history" / "revisions").exists()                         # a plan uses no test split
    elsewhere = cli(tmp_path.parent, "-C", str(root), "prompt", "revise", "prompts/decide.md", "-s", "decisions",
                    "--dry-run", "--json")                                         # the project's own path
    assert elsewhere.returncode == 0 and json.loads(elsewhere.stdout)["power"]["use"] == 1, elsewhere.stderr


def test_help_names_the_splits_and_the_budget_in_metric_calls(tmp_path):
    done = cli(tmp_path, "prompt", "revise", "--help", env={"COLUMNS": "200"})
    assert done.returncode == 0
    text = " ".join(done.stdout.split())
    for words in ("train split", "validation split", "test split", "--max-metric-calls", "metric calls",
                  "--max-cost", "--resume", "held-out"):
        assert words in text, words


def test_the_search_stops_at_its_budget_in_metric_calls_and_resumes_from_its_state(tmp_path):
    root = make(tmp_path)
    with LLMServer(Reflecting(rewording, coin(0.5), MARKER)) as server:
        env = env_for(server)
        first, _ = revise(root, "--max-metric-calls", "40", env=env)
        second, _ = revise(root, "--max-metric-calls", "80", "--resume", env=env)
        (root / "prompts" / "decide.md").write_text(BROKEN + "Edited by hand.\n")   # another search's prompt
        missing = cli(root, "prompt", "revise", "prompts/decide.md", "-s", "decisions", "--resume", env=env)
    a, b = first["search"], second["search"]
    n_val, minibatch = len(first["splits"]["validation"]), 3
    assert a["stopped"] == "metric calls" and 40 <= a["metric_calls"] <= 40 + 2 * minibatch + n_val
    assert b["resumed"] and b["metric_calls"] >= 80 and b["iterations"] > a["iterations"]
    assert b["candidates"] >= a["candidates"]
    assert b["target_calls"] <= b["metric_calls"] - a["metric_calls"]             # the seed's validation not paid twice
    assert missing.returncode == 2 and "no saved search to resume" in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1


def test_an_interrupted_search_says_so_and_resumes_where_it_stopped(tmp_path):
    root = make(tmp_path)
    go = threading.Event()
    calls: list[str] = []

    def held(prompt: str) -> str:
        """The reflecting model; its third reflection waits for the test (the search is mid-way)."""
        calls.append(prompt)
        if len(calls) == 3:
            go.wait(60)
        return rewording(prompt)

    with LLMServer(Reflecting(held, coin(0.5), MARKER)) as server:
        env = {**os.environ, **env_for(server), "NO_COLOR": "1"}
        search = subprocess.Popen([EVALLOOP, "prompt", "revise", "prompts/decide.md", "-s", "decisions",
                                   "--max-metric-calls", "5000"], cwd=root, env=env, text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  # as from a terminal: a background job (CI's) starts with SIGINT ignored
                                  preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        assert search.stderr is not None
        for line in search.stderr:                                                 # wait for the search to go
            if line.startswith("search: iteration 2 "):
                done = int(re.search(r"· (\d+)/5000 metric calls", line).group(1))
                break
        while len(calls) < 3 and search.poll() is None:                            # held in its third reflection
            go.wait(0.05)
        search.send_signal(signal.SIGINT)                                          # Ctrl-C
        go.set()
        _, rest = search.communicate(timeout=60)
        assert search.returncode == 130 and "--resume" in rest
        assert not (root / "prompts" / "decide.md.revised").exists()
        resumed, _ = revise(root, "--resume", "--max-metric-calls", str(done + 40), env=env_for(server))
    assert resumed["search"]["resumed"] and resumed["search"]["reflections"] >= 1  # it went on
    assert resumed["search"]["metric_calls"] >= done + 40 and resumed["search"]["iterations"] > 2


def test_a_useless_search_writes_nothing_and_the_next_revision_has_a_smaller_level(tmp_path):
    root = make(tmp_path)
    with LLMServer(Reflecting(rewording, coin(0.5), MARKER)) as server:
        env = env_for(server)
        first, _ = revise(root, "--write", "--max-metric-calls", "150", "--validation", "0.25", env=env)
        second, _ = revise(root, "--write", "--max-metric-calls", "150", "--validation", "0.25", env=env)
    validation = first["search"]["validation"]
    assert validation["best"] > validation["current"] + 0.15                       # luck on a small validation split…
    assert first["confirmation"]["gain"] < 0.1                                     # …that the test split does not share
    assert first["power"]["use"] == 1 and first["confirmation"]["alpha"] == pytest.approx(0.025)
    assert not first["confirmation"]["better"] and first["written"] is None
    assert second["power"]["use"] == 2 and second["power"]["alpha"] == pytest.approx(0.05 / 6)
    assert (root / "prompts" / "decide.md").read_text() == BROKEN
    assert len(Ledger(root / "history", "decisions").records()) == 2


def test_the_cost_budget_stops_the_search_and_keeps_the_confirmation_paid_for(tmp_path):
    root = make(tmp_path)
    with LLMServer(Reflecting(rewording, coin(0.5), MARKER)) as server:
        result, said = revise(root, "--max-cost", "0.003", "--max-metric-calls", "1000", env=env_for(server))
    assert result["search"]["stopped"] == "cost budget" and result["search"]["metric_calls"] < 1000
    assert result["cost_usd"] <= 0.003 * 1.05
    assert result["search"]["best"] == 0 or result["confirmation"] is not None    # the confirmation was affordable


def test_revise_without_an_llm_or_a_prompt_file_is_one_line(tmp_path):
    root = make(tmp_path)
    no_key = cli(root, "prompt", "revise", "prompts/decide.md", "-s", "decisions",
                 env={"ANTHROPIC_API_KEY": "", "EVALLOOP_LLM_BASE_URL": ""})
    assert no_key.returncode == 2 and "needs an LLM" in no_key.stderr
    assert len(no_key.stderr.strip().splitlines()) == 1
    missing = cli(root, "prompt", "revise", "prompts/nope.md", "-s", "decisions")
    assert missing.returncode != 0 and "cannot read prompt file" in missing.stderr


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sets(st.integers(0, 11), min_size=1), st.booleans()), max_size=12))
def test_the_ledger_counts_uses_as_a_reference_model_does_and_their_levels_stay_within_alpha(tmp_path, steps):
    """Each step is a revision: its test cases and whether it reached a confirmation. The ledger's
    count of earlier uses is the reference's (confirmations sharing at least half of the cases),
    and the levels one test split is confirmed at never add up past alpha."""
    ledger = Ledger(Path(tempfile.mkdtemp(dir=tmp_path)), "s")                  # a new ledger per example
    seen: list[set[str]] = []
    spent: dict[frozenset[str], float] = {}
    for ids, confirmed in steps:
        test = sorted(f"c{i}" for i in ids)
        expected = sum(1 for earlier in seen if len(set(test) & earlier) >= 0.5 * len(test))
        assert ledger.uses(test) == expected
        level = alpha_for(expected + 1, 0.05)
        record = RevisionRecord(suite="s", prompt_file="p", start="failing cases", before_sha="a", test_ids=test,
                                confirmation=Confirmation(n=len(test), current=0.5, candidate=0.5, gain=0.0,
                                                          p_value=1.0, alpha=level, better=False)
                                if confirmed else None)
        ledger.append(record)
        if confirmed:
            seen.append(set(test))
            spent[frozenset(test)] = spent.get(frozenset(test), 0.0) + level
    assert all(total < 0.05 for total in spent.values())
