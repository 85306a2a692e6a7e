"""The `fingerprint` a run reports (`--json`, JUnit) names the system under test: injected failure
memories and the case files are left out of it, as the docs say; a changed prompt changes it."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from support.cli import cli
from support.project import TARGET, make_project

DESCRIBED = TARGET + '''
def described(input):
    return input

def _describe(params):
    with open(os.environ["FP_STATE"]) as f:
        state = json.load(f)
    return {"prompt_sha": state["prompt"], "injected": {"memories": state["memories"]}}

described.fingerprint = _describe
'''
SUITE = {"name": "s", "target": "sut:described", "scorers": ["equals"],
         "cases": [{"id": f"c{i}", "input": i, "expected": i} for i in range(3)]}


def test_injected_memories_leave_the_reported_fingerprint_alone(tmp_path):
    root = make_project(tmp_path / "p", {"s": SUITE}, target=DESCRIBED)
    state = tmp_path / "state.json"
    env = {"FP_STATE": str(state)}

    def run(prompt: str, memories: list[str]) -> tuple[str, str]:
        state.write_text(json.dumps({"prompt": prompt, "memories": memories}))
        junit = tmp_path / "j.xml"
        proc = cli(root, "run", "--suite", "s", "--json", "--junit", str(junit), env=env)
        assert proc.returncode == 0, proc.stderr
        props = {p.get("name"): p.get("value") for p in ET.parse(junit).iter("property")}
        return json.loads(proc.stdout)["fingerprint"], props["fingerprint"]

    plain = run("p1", [])
    injected = run("p1", ["m-1", "m-2"])
    assert injected == plain  # a memory that comes or goes is not a change of the system
    changed = run("p2", ["m-1", "m-2"])
    assert changed[0] != plain[0] and changed[1] != plain[1]
