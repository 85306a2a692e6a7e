"""Prompt revision by simulation: how often ten rounds of ``prompt revise --write`` write a useless
prompt, whether the final prompt's test-split score is its score on fresh cases, and how often a
revision that can find the lost rule is written.

Every round is the shipped ``arevise`` — GEPA (``gepa.optimize``) on the train and validation
splits, the one confirmation on the test split at the level its ledger gives, ``write=True`` —
with its reflecting model on the loopback Messages server through the real ``anthropic`` SDK
(``support.revision``: ``rewording`` never finds a rule, ``finding`` reads the failures it is
shown). The task is a Python target (no HTTP per case, so hundreds of searches fit in minutes):

* ``null``: no prompt helps. The target answers right with chance 0.5, drawn afresh for every
  (prompt text, case) — a new prompt's luck on a case is independent of the old one's. Each trial
  is a new project (its own holdout salt, prompt and ledger) revised ``--rounds`` times in a row
  (``write=True``), each round a new search (GEPA's seed changes; with the same seed, the same
  prompt and a deterministic reflecting model a round would repeat the one before exactly): a
  written prompt is useless by construction. Reported: the share of trials
  with at least one useless prompt written (Wilson 95 % interval), and, for the final prompt, its
  mean on the test split minus its mean on ``--fresh`` fresh cases (mean over trials, 95 % interval).
* ``null, no ledger``: the same with the ledger deleted before each round, so every confirmation
  is at the first use's level: what the ledger's spending buys.
* ``better``: a prompt that states a rule is truly better by chance alone — the target is right
  with chance ``--better`` (0.7) with a rule and 0.5 without, drawn afresh per (prompt, case), so
  a candidate can also break cases — and ``finding`` adds a rule when shown a failure that needs
  it. One round per trial: the share written is the power end to end; "rule confirmed" counts the
  trials whose confirmation tested a candidate with a rule, and how many of those were written
  (the confirmation's own power); MDE is the plan's minimum detectable effect.
* ``rule``: the target follows the rules its prompt states; the prompt lost two; ``finding`` can
  find them. One round per trial: the share written, and the written prompt's fresh-case gain.

Usage: ``python bench/revise.py [--trials 200] [--rounds 10] [--budget 60] [--cases 80] [--better 0.7]
[--jobs 2] [--scenarios null,null-no-ledger,better,rule]``.
Seeds are fixed (trial ``t`` uses salt ``t``): a rerun gives the same table.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import yaml
from intervals import wilson  # bench/ is the script's folder

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

TARGET = '''
import hashlib
from pathlib import Path

HERE = Path(__file__).parent
RULE_SAME = {same!r}
RULE_DUP = {dup!r}


def _right(input):
    a, b = input["a"], input["b"]
    return "SKIP" if a == b else "UPDATE" if a.split()[1] == b.split()[1] else "CREATE"


def coin(input, prompt_file):
    """No prompt helps: right with chance 0.5, drawn for each (prompt text, case)."""
    system = (HERE / prompt_file).read_text()
    draw = hashlib.sha256(f"{{system}}\\0{{input['a']}}\\0{{input['b']}}".encode()).digest()[0]
    right = _right(input)
    return right if draw < 128 else ("CREATE" if right != "CREATE" else "UPDATE")


def better(input, prompt_file):
    """A prompt that states a rule is truly better, by chance alone: right with chance {better_p}
    with a rule, 0.5 without, drawn for each (prompt text, case)."""
    system = (HERE / prompt_file).read_text()
    key = f"{{system}}\\0{{input['a']}}\\0{{input['b']}}".encode()
    draw = int.from_bytes(hashlib.sha256(key).digest()[:8], "big") / 2**64
    p = {better_p} if (RULE_SAME in system or RULE_DUP in system) else 0.5
    right = _right(input)
    return right if draw < p else ("CREATE" if right != "CREATE" else "UPDATE")


def rules(input, prompt_file):
    """Follows the rules its prompt states, and only those."""
    system = (HERE / prompt_file).read_text()
    a, b = input["a"], input["b"]
    if a == b and RULE_DUP in system:
        return "SKIP"
    if a.split()[1] == b.split()[1] and RULE_SAME in system:
        return "UPDATE"
    return "CREATE"
'''


PROMPT_MARK = {"null": "(version {t})\n", "better": "(trial {t})\n", "rule": ""}
TARGET_FN = {"null": "coin", "better": "better", "rule": "rules"}


def make_project(root: Path, trial: int, kind: str, n_cases: int, n_fresh: int, better_p: float) -> None:
    """A new project: its own prompt text (so its own draws), holdout salt and ledger."""
    from support.revision import BROKEN, RULE_DUP, RULE_SAME, cases

    (root / "fixtures").mkdir(parents=True)
    (root / "prompts").mkdir()
    (root / "prompts" / "decide.md").write_text(BROKEN + PROMPT_MARK[kind].format(t=trial))
    (root / "sut.py").write_text(TARGET.format(same=RULE_SAME, dup=RULE_DUP, better_p=better_p))
    share = {"same": n_cases // 2, "dup": n_cases // 4, "other": n_cases - n_cases // 2 - n_cases // 4}
    target = {"ref": f"sut:{TARGET_FN[kind]}", "params": {"prompt_file": "prompts/decide.md"}}
    suite = {"name": "decisions", "target": target, "scorers": ["equals"],
             "holdout": {"fraction": 0.3, "salt": f"t{trial}"}, "cases": cases(**share)}
    (root / "fixtures" / "decisions.yaml").write_text(yaml.safe_dump(suite, sort_keys=False))
    fresh = {"same": n_fresh // 2, "dup": n_fresh // 4, "other": n_fresh - n_fresh // 2 - n_fresh // 4}
    fresh_suite = {**suite, "name": "fresh", "holdout": 0.0,
                   "cases": cases(prefix="fresh-", start=10_000, **fresh)}
    (root / "fixtures" / "fresh.yaml").write_text(yaml.safe_dump(fresh_suite, sort_keys=False))


def mean_on(root: Path, suite: str, ids: set[str] | None = None) -> float:
    """The mean score of the project's current prompt on a suite's cases (``ids``: only those)."""
    from evalloop import RunOptions, load_settings, run_suite

    settings = load_settings(root).model_copy(update={"learn": False, "run_log": False,
                                                      "history_url": f"sqlite:///{root / 'score.db'}"})
    report = run_suite(suite, RunOptions(select=(lambda c: c.id in ids) if ids is not None else None),
                       settings=settings)
    scores = next(iter(report.executed.results.values())).scores
    values = [v for c, v in scores.items() if ids is None or c in ids]
    return sum(values) / len(values)


_WORKER: dict[str, Any] = {}


def worker(url: str) -> dict[str, Any]:
    """This process's event loop and LLM client (built once: a client's HTTPS set-up is not what
    is measured), the reflecting model at ``url``; no response cache (each trial is a new project)."""
    if not _WORKER:
        os.environ.update({"ANTHROPIC_API_KEY": "bench", "ANTHROPIC_BASE_URL": url})
        from evalloop import load_settings
        from evalloop.run.services import build_services

        home = Path(tempfile.mkdtemp(prefix="evalloop-revise-bench-worker-"))
        services, _ = build_services(load_settings(home), engine="llm", cache="off")
        _WORKER.update(loop=asyncio.new_event_loop(), services=services)
    return _WORKER


def trial(args: tuple[int, str, int, int, int, int, float, str]) -> dict[str, Any]:
    """One trial: a new project revised ``rounds`` times; what was written and the final scores."""
    t, kind, rounds, budget, n_cases, n_fresh, better_p, url = args
    here = worker(url)
    from evalloop import load_settings
    from evalloop.loop.revise import arevise
    from evalloop.suites.lookup import find_suite

    project = "null" if kind.startswith("null") else kind
    with tempfile.TemporaryDirectory(prefix="evalloop-revise-bench-") as tmp:
        root = Path(tmp)
        make_project(root, t, project, n_cases, n_fresh, better_p)
        settings = load_settings(root)
        prompt = root / "prompts" / "decide.md"
        before_fresh = mean_on(root, "fresh") if project != "null" else None
        written = confirmed = found = 0
        mde: float | None = None
        n_test = 0
        for round_ in range(rounds):
            if kind == "null-no-ledger":
                (root / "history" / "revisions" / "decisions.jsonl").unlink(missing_ok=True)
            # a new GEPA seed each round: another search (other minibatches, so other reflections and
            # candidates), as a sampling reflecting model would give; the same seed repeats a search
            options = settings.revise.model_copy(update={"max_metric_calls": budget, "seed": 1000 * t + round_})
            result = here["loop"].run_until_complete(arevise(prompt, "decisions", settings=settings, write=True,
                                                             options=options, services=here["services"]))
            if round_ == 0:
                mde, n_test = result.power.mde, result.power.n_test
            written += result.written is not None
            confirmed += result.confirmation is not None
            found += result.confirmation is not None and "+RULE:" in result.diff
        test = find_suite("decisions", root).held_out_ids()
        return {"written": written, "confirmed": confirmed, "found": found, "mde": mde, "n_test": n_test,
                "test": mean_on(root, "decisions", test), "fresh": mean_on(root, "fresh"),
                "before_fresh": before_fresh}



def mean_ci(values: list[float]) -> tuple[float, float, float]:
    n = len(values)
    m = sum(values) / n
    sd = math.sqrt(sum((v - m) ** 2 for v in values) / max(n - 1, 1))
    return m, m - 1.96 * sd / math.sqrt(n), m + 1.96 * sd / math.sqrt(n)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--budget", type=int, default=60, help="--max-metric-calls of each round")
    parser.add_argument("--cases", type=int, default=80)
    parser.add_argument("--fresh", type=int, default=200)
    parser.add_argument("--better", type=float, default=0.7, help="the better scenario's chance with a rule")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--scenarios", default="null,null-no-ledger,better,rule")
    args = parser.parse_args()
    from evalloop.loop.gepa_adapter import REFLECT_SYSTEM
    from support.messages_server import LLMServer, Reflecting
    from support.revision import finding, rewording, task

    def reflect(prompt: str) -> str:  # the null scenarios' reflector never finds a rule; the others' can
        return rewording(prompt) if "(version " in prompt else finding(prompt)

    print(f"{args.cases} cases (30 % held out: the test split), {args.fresh} fresh cases; "
          f"{args.budget} metric calls a round; {args.trials} trials; better: 0.5 -> {args.better}\n")
    print(f"{'scenario':<15} {'rounds':>6} {'trials with a write':>22} {'95 % interval':>14} "
          f"{'test - fresh (final)':>26} {'fresh gain':>10} {'rule confirmed':>15} {'MDE':>6} {'s/round':>8}")
    with LLMServer(Reflecting(reflect, task, REFLECT_SYSTEM[:60])) as server:
        for kind in args.scenarios.split(","):
            rounds = args.rounds if kind.startswith("null") else 1
            started = time.perf_counter()
            jobs = [(t, kind, rounds, args.budget, args.cases, args.fresh, args.better, server.url)
                    for t in range(args.trials)]
            rows = []
            with ProcessPoolExecutor(args.jobs) as pool:
                for row in pool.map(trial, jobs):
                    rows.append(row)
                    if len(rows) % 25 == 0:
                        print(f"  {kind}: {len(rows)}/{len(jobs)} trials, "
                              f"{sum(1 for r in rows if r['written'])} with a write", file=sys.stderr, flush=True)
            per_round = (time.perf_counter() - started) * args.jobs / (len(rows) * rounds)
            k = sum(1 for r in rows if r["written"])
            low, high = wilson(k, len(rows))
            m, a, b = mean_ci([r["test"] - r["fresh"] for r in rows])
            gain = found = ""
            if not kind.startswith("null"):
                g, _, _ = mean_ci([r["fresh"] - r["before_fresh"] for r in rows if r["written"]] or [0.0])
                gain = f"{g:+.3f}"
                n_found = sum(1 for r in rows if r["found"])
                k_found = sum(1 for r in rows if r["found"] and r["written"])
                found = f"{k_found}/{n_found} written"
            mdes = [r["mde"] for r in rows if r["mde"] is not None]
            mde = f"{sum(mdes) / len(mdes):.3f}" if mdes else "none"
            n_test = sum(r["n_test"] for r in rows) / len(rows)
            confirmed = sum(r["confirmed"] for r in rows)
            print(f"{kind:<15} {rounds:>6} {k:>5}/{len(rows):<4} ({100 * k / len(rows):5.1f} %) "
                  f"[{100 * low:4.1f}, {100 * high:4.1f}] %  {m:+.3f} [{a:+.3f}, {b:+.3f}]  "
                  f"{gain:>10} {found:>15} {mde:>6} {per_round:8.2f}   "
                  f"({confirmed} confirmations, {n_test:.1f} test cases)")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
