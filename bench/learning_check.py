"""The learning loop end to end, measured on held-out cases: break → regress → lesson → ``learn check``.

A throw-away project holds one ``decide`` suite: ``--cases`` same-subject pairs (a port changed:
UPDATE), a fifth as many different-subject pairs (CREATE) and a few duplicates (NOOP); each
case's expected action is what the reference local engine answers when healthy. The suite's
default split holds 30 % of the cases out (by the hash of their ids). Three healthy runs make
the baseline; then the target breaks (its UPDATE cut pushed out of reach), the run regresses,
and one failure memory opens — built from the learn cases only. ``learn check`` then runs the
broken target as four variants — no lesson, case ids only, the full lesson with the local
engine recalling corrected cases only (``lesson_rule=false``), and the full lesson read as a
rule (the UPDATE cut the corrections imply) — first on the held-out cases (the default: what
generalises), then on all cases (learn cases included: recall). Each row: mean, paired
difference from "none" with its p-value, wall time and its ratio to "none".

Usage: ``python bench/learning_check.py [--cases 40]``.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path

import yaml

from evalloop import load_settings, run_suite
from evalloop.loop.learncheck import acheck
from evalloop.reference.memory_ops import decide_local

WRAPPER = '''
import os
from evalloop.reference import memory_ops

async def decide(input, ctx=None, lesson_rule=True):
    broken = os.path.exists(os.path.join(os.path.dirname(__file__), "BROKEN"))
    return await memory_ops.decide(input, ctx=ctx, similar_at=1.01 if broken else None, lesson_rule=lesson_rule)

decide.fingerprint = memory_ops.decide.fingerprint
'''


TOPICS = ["the team lunch moved to Friday", "invoices are archived after 90 days", "the logo uses navy blue",
          "on-call rotates every Monday", "the office closes at 6 pm", "backups run nightly at 2 am"]


def project(root: Path, n: int) -> None:
    cases = []

    def add(cid: str, a: str, b: str) -> None:
        cases.append({"id": cid, "input": {"existing": {"content": a}, "incoming": {"content": b}},
                      "expected": {"action": decide_local(a, b).action}})

    for i in range(n):
        add(f"case-{i:03d}", f"Service number {i} listens on port {8000 + i} in the staging cluster",
            f"Service number {i} listens on port {9000 + i} in the staging cluster")
    for i in range(max(1, n // 5)):
        add(f"other-{i:03d}", f"Service number {i} listens on port {8000 + i} in the staging cluster",
            TOPICS[i % len(TOPICS)].capitalize() + f" (note {i})")
    for i in range(3):
        add(f"dup-{i}", f"Use pnpm {i}", f"Use pnpm {i}")
    (root / "fixtures").mkdir(parents=True)
    (root / "sut.py").write_text(WRAPPER)
    suite = {"name": "decisions", "target": "sut:decide", "scorers": ["similarity-detection"], "cases": cases}
    (root / "fixtures" / "decisions.yaml").write_text(yaml.safe_dump(suite, sort_keys=False))


VARIANTS = ["none:inject=off", "ids:inject=ids", "recall:inject=full,lesson_rule=false", "full:inject=full"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=40)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="evalloop-learn-bench-") as tmp:
        root = Path(tmp)
        project(root, args.cases)
        settings = load_settings(root)
        for _ in range(3):
            run_suite("decisions", settings=settings)
        (root / "BROKEN").write_text("")
        broken = run_suite("decisions", settings=settings)
        print(f"broken run: mean {broken.executed.summaries['similarity-detection'].mean:.3f}, "
              f"verdict {broken.comparison.scorers[0].verdict}, memories {broken.extras.get('memories')}")
        s = "similarity-detection"
        for on in ("held-out", "all"):
            check = asyncio.run(acheck("decisions", settings=settings, variants=VARIANTS, on=on))
            none = check.results[0]
            print(f"\non {on}: {check.n_cases} cases ({check.held_out} held out, split {check.split})")
            print(f"{'variant':8} {'mean':>6} {'diff':>7} {'p':>8} {'wall s':>7} {'× none':>7}")
            for r in check.results:
                p = r.p_value.get(s)
                print(f"{r.variant:8} {r.means[s]:6.3f} {r.diff.get(s, 0.0):+7.3f} "
                      f"{'' if p is None else f'{p:.2g}':>8} {r.seconds:7.2f} {r.seconds / none.seconds:7.2f}")


if __name__ == "__main__":
    main()
