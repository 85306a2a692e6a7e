"""``evalloop prompt revise``: reflect on a regression's lessons, propose revisions, keep one only if it
is significantly better on the held-out cases — on the loopback Messages API, with a scripted
reflector and a scripted model whose answers depend on the rules in its system prompt."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from evalloop.suites.lookup import find_suite
from support.cli import cli
from support.messages_server import LLMServer, Reply, Seen

RULE = "RULE: when both texts name the same service, answer UPDATE."
GOOD = f"Decide whether the incoming memory updates the existing one. Answer UPDATE or CREATE.\n{RULE}\n"
BROKEN = "Decide whether the incoming memory updates the existing one. Answer UPDATE or CREATE.\n"
VAGUE = BROKEN + "Be careful and think about it.\n"

TARGET = '''
from pathlib import Path
from evalloop.llm.types import LLMRequest, Message

HERE = Path(__file__).parent

async def decide(input, ctx, prompt_file="prompts/decide.md"):
    """The user's own operation: its system prompt is the prompt file."""
    system = (HERE / prompt_file).read_text()
    request = LLMRequest(model=ctx.llm.model, system=system, max_tokens=20,
                         messages=[Message(role="user", content=f"A: {input['a']}\\nB: {input['b']}")])
    return (await ctx.llm.complete(request)).text.strip()

decide.uses_llm = True
'''


def cases() -> list[dict]:
    out = [{"id": f"same-{i:02d}", "input": {"a": f"The svc{i} service listens on port {8000 + i}",
                                              "b": f"The svc{i} service listens on port {9000 + i}"},
            "expected": "UPDATE"} for i in range(30)]
    out += [{"id": f"other-{i:02d}", "input": {"a": f"The svc{i} service listens on port {8000 + i}",
                                                "b": f"Lunch moved to Friday, week {i}"},
             "expected": "CREATE"} for i in range(10)]
    return out


def make(root: Path) -> Path:
    (root / "fixtures").mkdir(parents=True)
    (root / "prompts").mkdir()
    (root / "prompts" / "decide.md").write_text(GOOD)
    (root / "sut.py").write_text(TARGET)
    suite = {"name": "decisions", "target": {"ref": "sut:decide", "params": {"prompt_file": "prompts/decide.md"}},
             "scorers": ["equals"], "cases": cases()}
    (root / "fixtures" / "decisions.yaml").write_text(yaml.safe_dump(suite, sort_keys=False))
    return root


class Script:
    """The loopback LLM: a reflector proposing ``revisions`` in turn, and a model that answers UPDATE
    only when its system prompt has RULE and both texts name the same service."""

    def __init__(self) -> None:
        self.revisions: list[str] = []
        self.reflections: list[Seen] = []

    def __call__(self, seen: Seen) -> Reply:
        if seen.forced_tool == "proposal":
            self.reflections.append(seen)
            number = int(re.search(r"Write revision (\d+) of", seen.last_user_text).group(1))
            return Reply.of_tool({"revised_prompt": self.revisions[number - 1], "rationale": "scripted"})
        system = seen.body.get("system") or ""
        system = system if isinstance(system, str) else "".join(b["text"] for b in system)
        a, b = re.findall(r"^[AB]: (.*)$", seen.last_user_text, re.M)
        same = a.split()[1] == b.split()[1]
        return Reply.of_text("UPDATE" if RULE in system and same else "CREATE")


def test_prompt_revise_keeps_a_significantly_better_candidate_and_rejects_others(tmp_path):
    root = make(tmp_path)
    script = Script()
    with LLMServer(script) as server:
        env = {"ANTHROPIC_API_KEY": "test", "ANTHROPIC_BASE_URL": server.url, "COLUMNS": "160"}
        for _ in range(3):
            assert cli(root, "run", "-s", "decisions", env=env).returncode == 0
        (root / "prompts" / "decide.md").write_text(BROKEN)             # someone loses the rule
        broken = cli(root, "run", "-s", "decisions", env=env)
        assert broken.returncode == 1 and "stored failure memory" in broken.stderr, broken.stderr

        script.revisions = [GOOD, VAGUE]
        done = cli(root, "prompt", "revise", "prompts/decide.md", "-s", "decisions", "--candidates", "2",
                   "--json", env=env, timeout=300)
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout)
        good, vague = result["candidates"]
        assert good["significant"] and good["diff"]["equals"] > 0.5 and good["p_value"]["equals"] < 0.05
        assert not vague["significant"] and vague["diff"]["equals"] == 0
        assert result["on"] == "held-out" and result["n_cases"] == len(find_suite("decisions", root).held_out_ids())
        assert result["reflect_cost_usd"] > 0 and vague["cost_usd"] > 0      # (the good one replays the cache)
        assert result["best"] == "candidate-1"
        assert (root / "prompts" / "decide.md").read_text() == BROKEN     # the user's file is untouched
        assert (root / "prompts" / "decide.md.revised").read_text() == GOOD

        # the reflector read the lessons, fenced, and never a held-out case
        asked = script.reflections[0].last_user_text
        assert "<<<PAST FAILURE " in asked and "<<<CURRENT PROMPT " in asked
        held = find_suite("decisions", root).held_out_ids()
        shown = set(re.findall(r"^- ((?:same|other)-\d\d)$", asked, re.M))
        assert shown and not shown & held
        for c in cases():
            if c["id"] in held:
                assert c["input"]["b"] not in asked

        # a candidate that is not better is rejected: nothing written
        (root / "prompts" / "decide.md.revised").unlink()
        script.revisions = [VAGUE]
        table = cli(root, "prompt", "revise", "prompts/decide.md", "-s", "decisions", "--candidates", "1",
                    env=env, timeout=300)
        assert table.returncode == 0, table.stderr
        assert "no candidate is significantly better: nothing written" in table.stdout
        assert "held-out score" in table.stdout and "candidate-1" in table.stdout
        assert not (root / "prompts" / "decide.md.revised").exists()
        assert (root / "prompts" / "decide.md").read_text() == BROKEN

        # --write: the winner replaces the prompt (3 candidates: replies to "1 of 1" are in the response cache)
        script.revisions = [VAGUE, GOOD, VAGUE]
        written = cli(root, "prompt", "revise", "prompts/decide.md", "-s", "decisions", "--candidates", "3",
                      "--write", env=env, timeout=300)
        assert written.returncode == 0, written.stderr
        assert "kept candidate-2" in written.stdout
        assert (root / "prompts" / "decide.md").read_text() == GOOD
        assert not (root / "prompts" / "decide.md.revised").exists()


def test_prompt_revise_without_an_incident_or_a_key_is_one_line(tmp_path):
    root = make(tmp_path)
    with LLMServer(Script()) as server:
        env = {"ANTHROPIC_API_KEY": "test", "ANTHROPIC_BASE_URL": server.url}
        nothing = cli(root, "prompt", "revise", "prompts/decide.md", "-s", "decisions", env=env)
    assert nothing.returncode == 2 and "no open failure memory" in nothing.stderr
    assert len(nothing.stderr.strip().splitlines()) == 1
    missing = cli(root, "prompt", "revise", "prompts/nope.md", "-s", "decisions")
    assert missing.returncode != 0 and "cannot read prompt file" in missing.stderr
