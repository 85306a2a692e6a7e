"""A project for ``prompt revise`` on the loopback Messages server: a decision task whose prompt
lost two rules, the task's model (it answers by the rules in its system prompt), and reflecting
models that read the reflection prompt they receive.

The task: given two memory texts A and B, answer ``SKIP`` (B repeats A word for word, needs
:data:`RULE_DUP`), ``UPDATE`` (both name the same service, needs :data:`RULE_SAME`) or ``CREATE``.
The model without a rule answers ``CREATE``. :func:`finding` is a reflecting model that finds a
rule only from a failure it is shown — an expected ``SKIP`` given for a text repeated word for
word, or an expected ``UPDATE`` for two texts naming the same service — and adds one rule per
reflection (the lowest-scoring failure first); shown no such failure, it only rewords.
:func:`rewording` never finds a rule.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from pathlib import Path

import yaml

from .messages_server import Reply, Seen

RULE_SAME = "RULE: when both texts name the same service, answer UPDATE."
RULE_DUP = "RULE: when B repeats A word for word, answer SKIP."
BROKEN = "Decide whether memory B updates memory A. Answer UPDATE, CREATE or SKIP.\n"
GOOD = BROKEN + RULE_SAME + "\n" + RULE_DUP + "\n"

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


def cases(prefix: str = "", start: int = 0, same: int = 30, dup: int = 15, other: int = 15) -> list[dict]:
    """The suite's cases (``prefix`` and ``start`` make fresh ones the suite never had)."""
    out = []
    for i in range(start, start + same):
        out.append({"id": f"{prefix}same-{i:03d}", "input": {"a": f"The svc{i} service listens on port {8000 + i}",
                                                             "b": f"The svc{i} service listens on port {9000 + i}"},
                    "expected": "UPDATE"})
    for i in range(start, start + dup):
        text = f"Backups of db{i} run at {i % 24:02d}:{(7 * i) % 60:02d} every night"
        out.append({"id": f"{prefix}dup-{i:03d}", "input": {"a": text, "b": text}, "expected": "SKIP"})
    for i in range(start, start + other):
        out.append({"id": f"{prefix}other-{i:03d}", "input": {"a": f"The svc{i} service listens on port {8000 + i}",
                                                              "b": f"Lunch moved to Friday, week {i}"},
                    "expected": "CREATE"})
    return out


def make(root: Path, prompt: str = BROKEN, suite_cases: list[dict] | None = None, name: str = "decisions",
         prompt_path: str = "prompts/decide.md") -> Path:
    """A project in ``root`` with the suite ``name`` and its prompt file."""
    (root / "fixtures").mkdir(parents=True, exist_ok=True)
    (root / "prompts").mkdir(exist_ok=True)
    if not (root / prompt_path).exists():
        (root / prompt_path).write_text(prompt)
    (root / "sut.py").write_text(TARGET)
    suite = {"name": name, "target": {"ref": "sut:decide", "params": {"prompt_file": prompt_path}},
             "scorers": ["equals"], "cases": suite_cases if suite_cases is not None else cases()}
    (root / "fixtures" / f"{name}.yaml").write_text(yaml.safe_dump(suite, sort_keys=False))
    return root


def _texts(seen: Seen) -> tuple[str, str, str]:
    a, b = re.findall(r"^[AB]: (.*)$", seen.last_user_text, re.M)
    return seen.system_text, a, b


def task(seen: Seen) -> Reply:
    """The task's model: it follows the rules its system prompt states, and only those."""
    system, a, b = _texts(seen)
    if a == b and RULE_DUP in system:
        return Reply.of_text("SKIP")
    if a.split()[1] == b.split()[1] and RULE_SAME in system:
        return Reply.of_text("UPDATE")
    return Reply.of_text("CREATE")


def coin(p: float = 0.5) -> Callable[[Seen], Reply]:
    """A task model no prompt helps: right with chance ``p``, drawn afresh for every (system
    prompt, input) — a new prompt's luck on a case is independent of the old one's."""

    def answer(seen: Seen) -> Reply:
        system, a, b = _texts(seen)
        right = "SKIP" if a == b else "UPDATE" if a.split()[1] == b.split()[1] else "CREATE"
        draw = int.from_bytes(hashlib.sha256(f"{system}\0{a}\0{b}".encode()).digest()[:8], "big") / 2**64
        return Reply.of_text(right if draw < p else ("CREATE" if right != "CREATE" else "UPDATE"))

    return answer


_EXAMPLE = re.compile(r"^# Example \d+\n(.*?)(?=^# Example \d+\n|\Z)", re.M | re.S)
_FENCED = r"## {}\n<<<\w+ \w+>>>\n(.*?)\n<<<END \w+ \w+>>>"


def shown_cases(prompt: str) -> list[dict]:
    """The cases a reflection prompt shows: id, input, expected answer and the answer given."""
    out = []
    for block in _EXAMPLE.findall(prompt):
        fields = {}
        for name, key in (("Input", "input"), ("Expected answer", "expected"), ("Answer given", "got")):
            found = re.search(_FENCED.format(re.escape(name)), block, re.S)
            fields[key] = found.group(1) if found else None
        case_id = re.search(r"## Case\n(\S+)", block)
        fields["id"] = case_id.group(1) if case_id else None
        try:
            fields["input"] = json.loads(fields["input"] or "null")
        except ValueError:
            fields["input"] = None
        out.append(fields)
    return out


def current_prompt(prompt: str) -> str:
    """The current prompt a reflection prompt shows."""
    found = re.search(r"--- current prompt ---\n(.*?)\n--- end of the current prompt ---", prompt, re.S)
    return found.group(1) if found else ""


def finding(prompt: str) -> str:
    """Reads the failures shown and adds the rule the first of them lacks (see the module's text)."""
    current = current_prompt(prompt).rstrip("\n")
    for case in shown_cases(prompt):
        given, expected, pair = case["got"], case["expected"], case["input"]
        if given == expected or not isinstance(pair, dict):
            continue
        if expected == "SKIP" and pair["a"] == pair["b"] and RULE_DUP not in current:
            return f"```\n{current}\n{RULE_DUP}\n```"
        if expected == "UPDATE" and pair["a"].split()[1] == pair["b"].split()[1] and RULE_SAME not in current:
            return f"```\n{current}\n{RULE_SAME}\n```"
    return rewording(prompt)


def rewording(prompt: str) -> str:
    """Never finds a rule: the current prompt with one more sentence that says nothing new."""
    current = current_prompt(prompt).rstrip("\n")
    n = int(hashlib.sha256(prompt.encode()).hexdigest()[:6], 16) % 1000
    return f"```\n{current}\nRead both texts carefully ({n}).\n```"
