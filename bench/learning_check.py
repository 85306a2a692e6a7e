"""The learning loop end to end, measured: break → regress → failure memory → ``learn check``.

A throw-away project holds one ``decide`` suite of ``--cases`` pairs (each's expected action is
what the reference local engine answers when healthy). Three healthy runs make the baseline;
then the target breaks (its UPDATE cut pushed out of reach), the run regresses, and one failure
memory opens. ``learn check`` then runs the broken target as the three variants — no memory,
case ids only, the full feedback text — and prints each one's mean, paired difference from
"none" with its p-value, and its wall time as a ratio of "none" (the cost of reading and
injecting the memories). The local engine acts on memories through their structured
corrections, so "full" recovers the cases the memory records: this measures the plumbing and its
cost, not a model's ability to generalise.

Usage: ``python bench/learning_check.py [--cases 24]``.
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

async def decide(input, ctx=None):
    broken = os.path.exists(os.path.join(os.path.dirname(__file__), "BROKEN"))
    return await memory_ops.decide(input, ctx=ctx, similar_at=1.01 if broken else None)

decide.fingerprint = memory_ops.decide.fingerprint
'''


def project(root: Path, n: int) -> None:
    cases = []
    for i in range(n):
        a = f"Service number {i} listens on port {8000 + i} in the staging cluster"
        b = f"Service number {i} listens on port {9000 + i} in the staging cluster"
        cases.append({"id": f"case-{i:03d}", "input": {"existing": {"content": a}, "incoming": {"content": b}},
                      "expected": {"action": decide_local(a, b).action}})
    (root / "fixtures").mkdir(parents=True)
    (root / "sut.py").write_text(WRAPPER)
    suite = {"name": "decisions", "target": "sut:decide", "scorers": ["similarity-detection"], "cases": cases}
    (root / "fixtures" / "decisions.yaml").write_text(yaml.safe_dump(suite, sort_keys=False))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=24)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="evalloop-learn-bench-") as tmp:
        root = Path(tmp)
        project(root, args.cases)
        settings = load_settings(root)
        for _ in range(3):
            run_suite("decisions", settings=settings)
        (root / "BROKEN").write_text("")
        broken = run_suite("decisions", settings=settings)
        print(f"broken run: mean {broken.outcome.summaries['similarity-detection'].mean:.3f}, "
              f"verdict {broken.comparison.scorers[0].verdict}, memories {broken.extras.get('memories')}")
        check = asyncio.run(acheck("decisions", settings=settings))
        s = "similarity-detection"
        none = check.results[0]
        print(f"{'variant':8} {'mean':>6} {'diff':>7} {'p':>8} {'wall s':>7} {'× none':>7}")
        for r in check.results:
            p = r.p_value.get(s)
            print(f"{r.variant:8} {r.means[s]:6.3f} {r.diff.get(s, 0.0):+7.3f} {'' if p is None else f'{p:.2g}':>8} "
                  f"{r.seconds:7.2f} {r.seconds / none.seconds:7.2f}")

if __name__ == "__main__":
    main()
