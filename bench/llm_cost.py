"""What a nightly LLM suite costs: live and uncached (as before), with prompt caching, and in batch
mode with caching — side by side, on the loopback Messages-API server with the published price
rules (Haiku 4.5: $1 / $5 per million tokens; cache write 1.25x, read 0.1x; batch 0.5x).

Three 1,000-case suites, each run three ways through the real pipeline (history, scorers, SDK):

* ``judge``: an LLM-judge suite (``llm-rubric``) whose rubric carries graded examples
  (≈ 5,000 tokens: above Haiku 4.5's 4,096-token minimum cacheable prefix);
* ``judge, short rubric``: the same judge with a one-paragraph rubric (below the minimum: caching
  cannot help, and the run says so);
* ``target``: the reference ``decide`` operation on the llm engine (the target calls the LLM
  through evalloop's client; its prompt is below the minimum too), graded by a heuristic.

The goal: (c) batch + caching <= 35 % of (a) for the judge suite. The server runs in its own
process, so "CPU per call" is evalloop's own (the run, the SDK, the history writes).
Run: ``.venv/bin/python bench/llm_cost.py [--cases N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "src"))

GOAL = 0.35
JUDGE_OUTPUT_TOKENS = 150  # a judge's verdict with its issues and strengths
EXAMPLE = ("Example {i}. INPUT: a user asks how to rotate the signing key of service {i}. OUTPUT: a "
           "step-by-step answer naming the key store, the rollout order and the rollback path. "
           "GRADE: {g}. WHY: it is {why}.\n")
LONG_RUBRIC = ("Grade the answer for correctness, completeness and actionability. Graded examples:\n"
               + "".join(EXAMPLE.format(i=i, g=90 - i % 5 * 20, why=["complete", "vague", "wrong"][i % 3])
                         for i in range(80)))
SHORT_RUBRIC = "Grade the answer for correctness, completeness and actionability."


def serve() -> None:
    """The loopback server in this (child) process, until stdin closes."""
    from support.messages_server import LLMServer, Reply, Seen

    def answer(seen: Seen) -> Reply:
        if seen.forced_tool == "judge_verdict":
            return Reply.of_tool({"score": 75, "issues": ["terse"], "strengths": ["right"]},
                                 output_tokens=JUDGE_OUTPUT_TOKENS)
        return Reply.of_tool({"action": "UPDATE", "reason": "same subject"})

    with LLMServer(answer) as server:
        print(server.url, flush=True)
        sys.stdin.read()


def suites(n: int) -> dict[str, Any]:
    from evalloop.suites.models import Suite

    def judge(rubric: str) -> Suite:
        cases = [{"id": f"c{i}", "input": f"How do I rotate the signing key of service {i}?",
                  "expected": f"rotate key {i} in the key store"} for i in range(n)]
        return Suite.model_validate({"name": "judged", "target": "bench_sut:answer", "cases": cases,
                                     "scorers": [{"name": "llm-rubric", "params": {"rubric": rubric}}]})

    decide_cases = [{"id": f"d{i}", "input": {
        "existing": {"content": f"Service {i} refreshes its JWT 5 minutes before expiry"},
        "incoming": {"content": f"Service {i} should refresh OAuth tokens 5 min before they expire"},
        "expectSimilar": True}} for i in range(n)]
    target = Suite.model_validate({"name": "decided", "target": "evalloop.reference.memory_ops:decide",
                                   "cases": decide_cases, "scorers": ["similarity-detection"]})
    return {"judge": judge(LONG_RUBRIC), "judge, short rubric": judge(SHORT_RUBRIC), "target": target}


async def one(suite: Any, settings: Any, url: str, mode: str) -> dict[str, float]:
    from evalloop.llm import AnthropicClient
    from evalloop.loop.pipeline import arun_suite
    from evalloop.run.services import build_services, close_services

    client = AnthropicClient(api_key="bench", base_url=url, concurrency=16, prompt_cache=mode != "a")
    services, _ = build_services(settings, client=client, cache="off", engine="llm", batch=mode == "c")
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        report = await arun_suite(suite, settings=settings, services=services)
    finally:
        await close_services(services)
    run = report.executed.run
    return {"cost": run.cost_usd, "calls": run.llm_calls, "wall": time.perf_counter() - wall,
            "cpu": time.process_time() - cpu, "read": run.cache_read_tokens or 0, "batched": run.batched_calls or 0,
            "notes": " | ".join(n for n in report.notices if "prompt caching" in n)}


async def main(n: int) -> int:
    from evalloop.config import load_settings

    os.environ.update(EVALLOOP_BATCH_POLL="0.05", EVALLOOP_BATCH_WINDOW="0.05")
    server = subprocess.Popen([sys.executable, __file__, "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    url = server.stdout.readline().strip()  # type: ignore[union-attr]
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "bench_sut.py").write_text("def answer(input):\n    return 'Open the key store, rotate, "
                                                "roll out region by region, keep the old key for rollback.'\n")
        sys.path.insert(0, tmp)
        settings = load_settings(Path(tmp))
        print(f"{n} cases per suite; Haiku 4.5 prices; (a) live uncached, (b) live + prompt caching, "
              f"(c) batch + prompt caching")
        print(f"{'suite':22} {'(a) USD':>9} {'(b) USD':>9} {'(c) USD':>9} {'b/a':>6} {'c/a':>6} "
              f"{'c wall s':>8} {'c CPU/call':>10} {'a CPU/call':>10}")
        try:
            for name, suite in suites(n).items():
                a, b, c = [await one(suite, settings, url, mode) for mode in "abc"]
                print(f"{name:22} {a['cost']:9.4f} {b['cost']:9.4f} {c['cost']:9.4f} {b['cost'] / a['cost']:6.1%} "
                      f"{c['cost'] / a['cost']:6.1%} {c['wall']:8.2f} {c['cpu'] / c['calls'] * 1e3:8.2f}ms "
                      f"{a['cpu'] / a['calls'] * 1e3:8.2f}ms")
                assert c["batched"] == c["calls"] == a["calls"], (a, c)
                if b["notes"]:
                    print(f"    {b['notes']}")
                if name == "judge":
                    ok = c["cost"] / a["cost"] <= GOAL
                    failed = not ok
                    print(f"    goal (c) <= {GOAL:.0%} of (a): {'met' if ok else 'NOT met'}")
        finally:
            server.stdin.close()  # type: ignore[union-attr]
            server.wait(timeout=10)
    return 1 if failed else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve()
    else:
        sys.exit(asyncio.run(main(args.cases)))
