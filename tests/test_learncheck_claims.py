"""Issue #37 item 6: ``learn check`` claims only what it measured.

On main the headline "+0.769 on held-out cases (lessons read as a rule)" was unchanged when the
incident's text was replaced by lorem ipsum: the local reference engine refits one similarity cut
from the stored corrections and never reads the text. Its result is now labelled a mechanics check
that claims nothing; a model that reads its prompt (the loopback Messages server) is not labelled,
and lorem ipsum takes its gain away.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import yaml

from evalloop import load_settings, run_suite
from evalloop.learning import incidents as learning
from evalloop.loop.learncheck import acheck
from evalloop.memory.store import MemoryStore
from evalloop.reference.memory_ops import decide_local
from support.cli import cli
from support.messages_server import LLMServer, Reply, Seen, use_only

WRAPPER = '''
import os
from evalloop.reference import memory_ops

async def decide(input, ctx=None):
    broken = os.path.exists(os.path.join(os.path.dirname(__file__), "BROKEN"))
    return await memory_ops.decide(input, ctx=ctx, similar_at=1.01 if broken else None)

decide.fingerprint = memory_ops.decide.fingerprint
'''

LOREM = "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt."


def make(root: Path) -> Path:
    cases = []
    for i in range(24):
        a = f"Service number {i} listens on port {8000 + i} in the staging cluster"
        b = f"Service number {i} listens on port {9000 + i} in the staging cluster"
        cases.append({"id": f"case-{i:02d}", "input": {"existing": {"content": a}, "incoming": {"content": b}},
                      "expected": {"action": decide_local(a, b).action}})
    (root / "fixtures").mkdir(parents=True)
    (root / "sut.py").write_text(WRAPPER)
    suite = {"name": "decisions", "target": "sut:decide", "scorers": ["similarity-detection"], "cases": cases}
    (root / "fixtures" / "decisions.yaml").write_text(yaml.safe_dump(suite, sort_keys=False))
    settings = load_settings(root)
    for _ in range(3):
        run_suite("decisions", settings=settings)
    (root / "BROKEN").write_text("")
    assert run_suite("decisions", settings=settings).comparison.has_regression
    return root


def lorem(root: Path) -> None:
    """The incident's text replaced by lorem ipsum; its metadata (corrections included) kept."""
    with MemoryStore(load_settings(root).memory_file) as store:
        (record,) = learning.incidents(store, "decisions")
        store.update(record.id, LOREM, tags=record.tags, metadata=record.metadata)


def test_the_local_engine_result_is_a_mechanics_check_that_claims_nothing(tmp_path):
    root = make(tmp_path)
    check = asyncio.run(acheck("decisions", settings=load_settings(root)))
    gain = check.results[2].diff["similarity-detection"]
    assert gain > 0.5 and check.mechanics and "no claim" in check.claim()
    lorem(root)
    again = asyncio.run(acheck("decisions", settings=load_settings(root)))
    # the figure does not move with the text: which is why it is labelled, not read as generalisation
    assert again.results[2].diff["similarity-detection"] == gain and again.mechanics
    shown = cli(root, "learn", "check", "-s", "decisions", env={"COLUMNS": "80"})
    assert shown.returncode == 0, shown.stderr
    assert "mechanics check, no claim" in shown.stdout and "--engine llm" in " ".join(shown.stdout.split())
    assert json.loads(cli(root, "learn", "check", "-s", "decisions", "--json").stdout)["mechanics"] is True


def test_a_model_that_reads_the_text_is_not_labelled_and_lorem_ipsum_takes_its_gain(tmp_path, monkeypatch):
    """The loopback model answers a case's expected action when the lesson text shows its input."""
    root = make(tmp_path)

    def answer(s: Seen) -> Reply:
        incoming = re.search(r"<<<INCOMING MEMORY [0-9a-f]+>>>\n(.*?)\n<<<END", s.last_user_text, re.S).group(1)
        for inp, exp in re.findall(r"  input: (.*)\n  expected: (.*)\n", s.system_text):
            if incoming in inp:
                return Reply.of_tool({"action": json.loads(exp)["action"], "reason": "as the lesson says"})
        return Reply.of_tool({"action": "CREATE", "reason": "no idea"})

    variants = ["none:inject=off", "full:inject=full"]
    with LLMServer(answer) as server:
        use_only(server, monkeypatch)
        read = asyncio.run(acheck("decisions", settings=load_settings(root), variants=variants, engine="llm",
                                  on="all"))
        lorem(root)
        blank = asyncio.run(acheck("decisions", settings=load_settings(root), variants=variants, engine="llm",
                                   on="all"))
    assert not read.mechanics and "no claim" not in read.claim()
    assert read.results[1].diff["similarity-detection"] > 0
    assert blank.results[1].diff["similarity-detection"] == 0
