"""Issue #37 items 3–5: nothing of a held-out case reaches a lesson, whoever builds it.

A learn case's output (and the scorer's reason quoting it) that carries a held-out case's
expected answer or input is redacted before it is stored (finding 3); a run of held-out cases
alone writes no memory (finding 4); an incident's text says learn-case totals that agree with
each other (finding 5). The grep runs over every stored memory, every text a reader renders
(injection, ``lessons()``, ``prompt enhance``) and every request the loopback Messages server
receives.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from evalloop import RunOptions, lessons, load_settings, run_suite
from evalloop.history.store import HistoryStore
from evalloop.learning import incidents as learning
from evalloop.learning import injection
from evalloop.learning.lessons import clear_cache
from evalloop.memory.store import MemoryStore
from evalloop.reference.memory_ops import decide_local
from evalloop.suites.lookup import find_suite
from evalloop.suites.models import Case, Holdout
from evalloop.suites.split import HELD_OUT
from support.cli import cli
from support.messages_server import LLMServer, Reply, Seen, use_only

SERVICES = ["auth", "billing", "search", "gateway", "mailer", "ledger", "queue", "cache", "reports",
            "uploads", "metrics", "scheduler", "payments", "profile", "notify", "audit"]

#: the reference decide; while BROKEN exists its UPDATE cut is out of reach and its reason quotes
#: what LEAKS.json says for the incoming text (a held-out case's answer and input, for learn cases)
WRAPPER = '''
import json, os
from evalloop.reference import memory_ops

HERE = os.path.dirname(__file__)

async def decide(input, ctx=None):
    broken = os.path.exists(os.path.join(HERE, "BROKEN"))
    out = await memory_ops.decide(input, ctx=ctx, similar_at=1.01 if broken else None)
    if broken:
        with open(os.path.join(HERE, "LEAKS.json")) as f:
            out["reason"] = json.load(f).get(input["incoming"]["content"], out["reason"])
    return out

decide.fingerprint = memory_ops.decide.fingerprint
'''

#: a scorer whose message quotes the output (as many do: "expected X, got Y")
SCORER = '''
import json
from evalloop import Score, scorer

@scorer("action-said", binary=True)
def action_said(input, output, expected):
    out = output if isinstance(output, dict) else json.loads(output)
    ok = out.get("action") == expected["action"]
    return Score(value=float(ok), message=f"{out.get('action')}: {out.get('reason')}")
'''


def cases() -> list[dict]:
    out = []
    for i, name in enumerate(SERVICES):
        a = f"The {name} service listens on port {8000 + i} in staging"
        b = f"The {name} service listens on port {9000 + i} in staging"
        out.append({"id": f"port-{name}", "input": {"existing": {"content": a}, "incoming": {"content": b}},
                    "expected": {"action": decide_local(a, b).action, "note": f"answer-of-{name}"}})
    return out


def secrets(case: dict) -> list[str]:
    """What of a held-out case must never reach a lesson: its input texts and its expected note."""
    return [case["input"]["existing"]["content"], case["input"]["incoming"]["content"], case["expected"]["note"]]


def project(root: Path, chronic: bool = False) -> tuple[list[dict], list[dict]]:
    """The project, and its held-out and learn cases; every learn case's broken output quotes a
    held-out case (``chronic``: the first learn case's expected answer is wrong from the start)."""
    (root / "fixtures").mkdir(parents=True)
    (root / "scorers").mkdir()
    (root / "sut.py").write_text(WRAPPER)
    (root / "scorers" / "said.py").write_text(SCORER)
    every = cases()
    held_ids = Holdout().split([Case.model_validate(c) for c in every]).ids(HELD_OUT)
    held = [c for c in every if c["id"] in held_ids]
    learn = [c for c in every if c["id"] not in held_ids]
    suite = {"name": "decisions", "target": "sut:decide", "scorers": ["action-said"], "cases": every}
    if chronic:  # floor off: a suite under its floor opens an incident whose lesson would fix the case
        learn[0]["expected"]["action"] = "NOOP"
        suite["verdict"] = {"min_score": 0}
    (root / "fixtures" / "decisions.yaml").write_text(yaml.safe_dump(suite, sort_keys=False))
    assert find_suite("decisions", root).held_out_ids() == held_ids
    leaks = {c["input"]["incoming"]["content"]: f"looks like {h['expected']['note']} — see "
             f"{h['input']['incoming']['content']} and {h['input']['existing']['content']}"
             for c, h in zip(learn, held * len(learn), strict=False)}
    (root / "LEAKS.json").write_text(json.dumps(leaks))
    return held, learn


def regress(root: Path) -> None:
    settings = load_settings(root)
    for _ in range(3):
        assert not run_suite("decisions", settings=settings).comparison.has_regression
    (root / "BROKEN").write_text("")


def stored(root: Path) -> list[str]:
    settings = load_settings(root)
    if not settings.memory_file.exists():
        return []
    with MemoryStore(settings.memory_file) as store:
        return [r.information + "\n" + json.dumps(r.metadata) for r in store.list(limit=1000)]


def test_no_held_out_answer_or_input_reaches_a_memory_a_reader_or_a_request(tmp_path, monkeypatch):
    held, learn = project(tmp_path)
    assert len(held) >= 3 and len(learn) >= 8
    regress(tmp_path)
    broken = run_suite("decisions", settings=load_settings(tmp_path))
    assert broken.comparison.has_regression
    history = HistoryStore(load_settings(tmp_path).database_url)
    outputs = json.dumps([r.output for r in history.case_results(broken.executed.run.id)])
    assert all(s in outputs for h in held for s in secrets(h))          # the learn outputs do quote them
    memories = stored(tmp_path)
    assert len(memories) == 1 and "[held-out]" in memories[0]
    assert any(c["id"] in memories[0] for c in learn)                   # the lesson still shows learn cases

    settings = load_settings(tmp_path)
    suite = find_suite("decisions", tmp_path)
    injected, _ = injection.injected_for(settings, suite)
    clear_cache()
    served = lessons("decisions", project_dir=tmp_path, wait=60)
    enhanced = cli(tmp_path, "prompt", "enhance", str(tmp_path / "sut.py"), "--suite", "decisions").stdout
    assert injected.text and served == injected.text and "PAST FAILURE" in enhanced

    requests: list[Seen] = []

    def answer(seen: Seen) -> Reply:
        requests.append(seen)
        return Reply.of_tool({"action": "CREATE", "reason": "scripted"})

    with LLMServer(answer) as server:
        use_only(server, monkeypatch)
        run_suite("decisions", RunOptions(engine="llm", cache="off"), settings=load_settings(tmp_path))
    assert len(requests) == 16 and all("PAST FAILURE" in r.system_text for r in requests)
    for case in held:
        for text in [*memories, injected.text, served, enhanced, *(r.system_text for r in requests)]:
            assert not [s for s in secrets(case) if s in text], case["id"]
        own = case["input"]["incoming"]["content"]
        others = [json.dumps(r.body) for r in requests if own not in r.last_user_text]
        assert len(others) == 15 and not [s for s in secrets(case) for body in others if s in body]


def test_a_held_out_run_writes_no_memory(tmp_path):
    """Finding 4: main opened an incident from held-out scores alone ("0/0 correct; 7 newly failing")."""
    project(tmp_path)
    regress(tmp_path)
    part = cli(tmp_path, "run", "-s", "decisions", "--held-out", "--json")
    assert part.returncode == 1, part.stderr                              # the held-out cases regressed
    assert json.loads(part.stdout)["scorers"][0]["verdict"] == "regressed"
    assert stored(tmp_path) == [] and "no failure memory written" in part.stderr
    assert cli(tmp_path, "run", "-s", "decisions").returncode == 1      # a full run does open one
    (before,) = stored(tmp_path)
    again = cli(tmp_path, "run", "-s", "decisions", "--held-out", env={"EVALLOOP_INJECT_FAILURES": "0"})
    assert again.returncode == 1                                          # regressed again, without lessons
    assert stored(tmp_path) == [before]                                   # and the incident is not updated


def test_the_text_says_learn_case_totals_that_agree(tmp_path):
    """Finding 5: main said "0/23 correct" beside "30 newly failing", and "15/18 correct", "6 newly
    failing" beside "Failing cases (3 of 3)": held-out cases counted in some totals only."""
    held, learn = project(tmp_path, chronic=True)
    regress(tmp_path)
    run_suite("decisions", settings=load_settings(tmp_path))
    with MemoryStore(load_settings(tmp_path).memory_file) as store:
        (record,) = learning.incidents(store, "decisions")
    text = record.information
    correct = re.search(r"action-said: (\d+)/(\d+) correct \(\d+%\), (\d+) failing", text)
    against = re.search(r"(\d+) newly failing, (\d+) newly passing; (\d+) failing there too", text)
    shown = re.search(r"Failing cases \((\d+) of (\d+)\)", text)
    assert correct and against and shown, text
    passed, graded, failing = map(int, correct.groups())
    newly, _, chronic = map(int, against.groups())
    listed, of = map(int, shown.groups())
    assert graded == len(learn) and failing == graded - passed
    assert chronic == 1 and newly + chronic <= failing and of == failing - chronic and listed == min(5, of)
    figures = record.metadata["text_scores"]
    said = re.search(r"mean score: ([0-9.]+); the same cases in the baseline's last run: ([0-9.]+); drop ([0-9.]+)%",
                     text)
    assert said and f"{figures['learn_score']:.2f}" == said.group(1), text
    assert f"{figures['learn_baseline']:.2f}" == said.group(2)
    assert f"{100 * figures['learn_drop']:.1f}" == said.group(3)
    for case in held:
        assert case["id"] not in text



def test_the_redactor_removes_what_only_held_out_cases_say():
    from types import SimpleNamespace

    from evalloop.learning.heldout import Redactor

    held = [SimpleNamespace(id="h1", input={"q": "Where is the blue   lamp?"},
                            expected={"answer": "shelf-7", "n": 4242}),
            SimpleNamespace(id="h2", input="ok?", expected="UPDATE")]
    learn = [SimpleNamespace(id="l1", input={"q": "Where is the red chair?"}, expected={"answer": "UPDATE"})]
    redact = Redactor.of([*held, *learn], {"h1", "h2"})
    assert redact("got SHELF-7 for where is the BLUE lamp? (4242)") == "got [held-out] for [held-out] ([held-out])"
    assert redact("shelf-70 and 42420 and UPDATE and ok?") == "shelf-70 and 42420 and UPDATE and ok?"  # words
    assert redact(None) is None and Redactor([], learn)("shelf-7") == "shelf-7"
