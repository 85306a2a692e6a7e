"""The verdict over months, through real runs: false red nights, red streaks, detection, floors.

A nightly check is a test repeated every night, so a team lives with its behaviour *over time*:
how often an unchanged suite has a red night in a month, how long a false red lasts, how fast a
real drop turns red and whether it stays red, and how a suite near its floor fares. Every figure
here comes from real runs — ``run_suite(..., nightly=True)`` on a real suite file, a target
answering the scores this simulation drew, project scorers and a real SQLite history
(``bench/verdict_lab.py``'s project) — under two rules side by side on the same draws:

* ``before``: the nightly rule of the reference commit (``--reference``, default 4e61118),
  run from a checkout of that commit in its own processes;
* ``nightly``: this checkout's nightly rule (``run --nightly``, what scheduled fires run);
* ``single`` (on request): this checkout's one-off rule (``evalloop run``).

Scores: judge suites (each case's quality q ~ Beta(6, 2) times ``scale``, a night's grade
clip(q·(1 − drop) + shift + N(0, 0.2), 0, 1)) and pass/fail suites (75 % of cases pass with
p = 0.97, 10 % with p = 0.05, 15 % are flaky at 0.6; a drop scales every pass rate). Each trial
is a new suite and history: 5 warm-up nights fill the baseline window (the first of them
``lucky`` in one scenario), then each *phase* of the scenario starts from that saved history
(``fresh``) or goes on from the previous phase. A phase is a number of nights at one drop.

Measured per phase: P(≥ 1 red night) with red = a failing verdict (``regressed`` or
``below floor``), the mean red nights, P(a red streak longer than 3 nights); and for drops: the
share red by night 2, the mean first red night, and the share red on every night from its first
red to the end of the phase.

Usage: ``python bench/alarms.py [--trials 200] [--jobs 2] [--scenarios judge-50,judge-50-floor]
[--rules before,nightly] [--seed-base 0] [--budget 0.05]``. Seeds are fixed: a rerun gives the same table;
``--seed-base`` gives other draws (chunk ``c`` of the ``i``-th scenario uses seed ``1000 i + c +
base``; ``--jobs`` sets the chunks, so keep it for a rerun). Wilson 95 % intervals
are printed beside each share.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
WARM, SD = 5, 0.2
JUDGE_FLOOR = 0.70

#: name: kind, cases, floor (None: off), scale of q, lucky first warm-up night, phases
#: a phase: (label, nights, drop, fresh) — fresh phases start from the warm-up's saved history
SCENARIOS: dict[str, dict] = {
    "judge-50": {"kind": "judge", "n": 50, "phases": [
        ("unchanged", 30, 0.0, True), ("drop 20% (threshold)", 6, 0.20, True),
        ("drop 15%", 10, 0.15, True), ("drop 10% (half)", 10, 0.10, True)]},
    # the unchanged month alone: many months, for a false-alarm rate with a narrow interval
    "judge-50-unchanged": {"kind": "judge", "n": 50, "phases": [("unchanged", 30, 0.0, True)]},
    "judge-200": {"kind": "judge", "n": 200, "phases": [
        ("unchanged", 30, 0.0, True), ("drop 15%", 10, 0.15, True), ("drop 10% (half)", 10, 0.10, True),
        ("drop 7%", 10, 0.07, True)]},
    "judge-50-floor": {"kind": "judge", "n": 50, "floor": JUDGE_FLOOR, "mean": 0.72, "phases": [
        ("unchanged, 0.02 over the floor", 30, 0.0, True),
        ("10 points under the floor", 4, "floor-10", True)]},
    "judge-50-lucky": {"kind": "judge", "n": 50, "lucky": 0.10, "phases": [("unchanged", 30, 0.0, True)]},
    # the learning loop on (incidents opened, kept out of the baseline, injected): no windup through it
    "judge-50-lucky-learn": {"kind": "judge", "n": 50, "lucky": 0.10, "learn": True,
                             "phases": [("unchanged", 30, 0.0, True)]},
    "judge-50-learn": {"kind": "judge", "n": 50, "learn": True, "phases": [
        ("unchanged", 30, 0.0, True), ("drop 15%", 10, 0.15, True)]},
    "passfail-20": {"kind": "pass-fail", "n": 20, "phases": [
        ("unchanged", 30, 0.0, True), ("drop 10% (threshold)", 6, 0.10, True), ("drop 15%", 6, 0.15, True)]},
    "passfail-50": {"kind": "pass-fail", "n": 50, "phases": [
        ("unchanged", 30, 0.0, True), ("drop 10% (threshold)", 6, 0.10, True), ("drop 15%", 6, 0.15, True)]},
}
FAILING = ("regressed", "below floor")


# -- the worker: one rule, one scenario, in the process of the code it measures ---------------------
def _scale_for(mean: float, rng) -> float:
    """The scale of q that gives judge grades this mean (clipping included), by simulation."""
    import numpy as np

    q = rng.beta(6, 2, 200_000)
    low, high = 0.3, 1.2
    for _ in range(40):
        mid = (low + high) / 2
        got = float(np.clip(q * mid + rng.normal(0, SD, q.size), 0, 1).mean())
        low, high = (mid, high) if got < mean else (low, mid)
    return (low + high) / 2


def _copy(path: Path, into: sqlite3.Connection) -> sqlite3.Connection:
    """A SQLite file's content, copied into ``into`` (a memory store is saved beside the history)."""
    with closing(sqlite3.connect(path)) as source:
        source.backup(into)
    return into


def worker(spec: dict) -> Iterator[dict]:
    """Trials of one scenario under one rule; one JSON-able record per trial."""
    import numpy as np
    import yaml
    from verdict_lab import Lab

    from evalloop import RunOptions, load_settings, run_suite

    scenario = SCENARIOS[spec["scenario"]]
    kind, n, floor = scenario["kind"], scenario["n"], scenario.get("floor")
    nightly = spec["rule"] != "single"
    root = Path(tempfile.mkdtemp(prefix="alarms-"))
    atexit.register(shutil.rmtree, root, True)  # the worker is its own process: its project goes with it
    lab = Lab(root, kind)
    if scenario.get("learn"):  # incidents as a team has them (the lab turns learning off)
        (root / "evalloop.toml").write_text("run_log = false\nlearn = true\n")
        lab.settings = load_settings(root)
    memories = lab.settings.memory_file
    rng = np.random.default_rng(spec["seed"])
    scale = _scale_for(scenario["mean"], np.random.default_rng(0)) if "mean" in scenario else 1.0

    def night(scores: dict[str, float]) -> str:
        scorer = {"name": kind, "min_score": floor if floor is not None else 0}
        suite = {"name": "lab", "target": {"ref": "sut:answers", "params": {"path": str(lab.answers)}},
                 "scorers": [scorer], "cases": [{"id": c, "input": {"id": c}} for c in scores]}
        if spec.get("budget") is not None:  # the suite's alarm budget (default: the product's 0.05)
            suite["verdict"] = {"alarm_budget": spec["budget"]}
        (root / "fixtures" / "lab.yaml").write_text(yaml.safe_dump(suite, sort_keys=False))
        lab.answers.write_text(json.dumps(scores))
        report = run_suite("lab", RunOptions(nightly=nightly), settings=lab.settings, registry=lab.registry,
                           services=lab.services)
        return report.comparison.scorers[0].status.value

    for _ in range(spec["trials"]):
        if kind == "judge":
            q = rng.beta(6, 2, size=n) * scale

            def draw(drop, shift=0.0, q=q) -> dict[str, float]:
                if drop == "floor-10":  # the suite's mean 10 points under its floor
                    values = np.clip(q + rng.normal(0, SD, n), 0, 1)
                    values = np.clip(values + (JUDGE_FLOOR - 0.10) - values.mean(), 0, 1)
                else:
                    values = np.clip(q * (1 - drop) + shift + rng.normal(0, SD, n), 0, 1)
                return {f"c{i}": float(v) for i, v in enumerate(values)}
        else:
            p = np.array([0.97, 0.05, 0.6])[rng.choice(3, size=n, p=[0.75, 0.10, 0.15])]

            def draw(drop, shift=0.0, p=p) -> dict[str, float]:
                return {f"c{i}": float(v) for i, v in enumerate(rng.random(n) < p * (1 - drop))}
        lab.reset()
        for leftover in (memories, memories.with_name(memories.name + "-wal")):
            leftover.unlink(missing_ok=True)
        night(draw(0.0, scenario.get("lucky", 0.0)))
        for _ in range(WARM - 1):
            night(draw(0.0))
        snap = lab.save()
        kept = _copy(memories, sqlite3.connect(":memory:")) if memories.exists() else None
        record = {}
        for label, nights, drop, fresh in scenario["phases"]:
            if fresh:
                lab.restore(snap)
                for leftover in (memories, memories.with_name(memories.name + "-wal")):
                    leftover.unlink(missing_ok=True)
                if kept is not None:
                    with closing(sqlite3.connect(memories)) as target:
                        kept.backup(target)
            record[label] = [night(draw(drop)) for _ in range(nights)]
        yield record


# -- the driver ------------------------------------------------------------------------------------

def share(k: int, n: int) -> str:
    from intervals import wilson  # the driver's (a worker runs another checkout's bench/)

    lo, hi = wilson(k, n)
    return f"{k / n:6.1%} [{lo:.0%}–{hi:.0%}]" if n else "—"


def longest_streak(nights: list[str]) -> int:
    best = run = 0
    for s in nights:
        run = run + 1 if s in FAILING else 0
        best = max(best, run)
    return best


def summarise(records: list[dict], label: str, drop: object) -> dict[str, str]:
    t = len(records)
    nights = [r[label] for r in records]
    red = [sum(s in FAILING for s in x) for x in nights]
    out = {"P(≥ 1 red night)": share(sum(x > 0 for x in red), t),
           "red nights per trial": f"{sum(red) / t:.2f}",
           "P(red streak > 3)": share(sum(longest_streak(x) > 3 for x in nights), t)}
    if drop:
        firsts = [next((i + 1 for i, s in enumerate(x) if s in FAILING), None) for x in nights]
        caught = [f for f in firsts if f is not None]
        out["red by night 2"] = share(sum(f is not None and f <= 2 for f in firsts), t)
        out["mean first red night"] = f"{sum(caught) / len(caught):.2f}" if caught else "—"
        stays = sum(f is not None and all(s in FAILING for s in x[f - 1:]) for f, x in zip(firsts, nights, strict=True))
        out["red every night after first"] = share(stays, len(caught)) if caught else "—"
    else:
        out["P(false improved)"] = share(sum(any(s == "improved" for s in x) for x in nights), t)
    return out


def checkout(rev: str) -> Path:
    """A detached worktree of ``rev`` (reused between runs of this bench)."""
    where = Path(tempfile.gettempdir()) / f"evalloop-alarms-{rev[:12]}"
    if not (where / "src" / "evalloop").is_dir():
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "--force", str(where), rev],
                       check=True, capture_output=True)
    return where


def launch(code: Path, spec: dict) -> list[dict]:
    env = {**os.environ, "PYTHONPATH": f"{code / 'src'}{os.pathsep}{code / 'bench'}"}
    # -P: the measured checkout's bench/ (its verdict_lab) comes first, not this script's folder
    proc = subprocess.run([sys.executable, "-P", str(Path(__file__).resolve()), "--worker", json.dumps(spec)],
                          env=env, capture_output=True, text=True, cwd=code)
    if proc.returncode:
        raise SystemExit(f"worker {spec} failed:\n{proc.stderr[-3000:]}")
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=60)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--reference", default="4e61118", help="the commit whose nightly rule is 'before'")
    ap.add_argument("--scenarios", default="judge-50,judge-200,judge-50-floor,judge-50-lucky,passfail-20")
    ap.add_argument("--rules", default="before,nightly")
    ap.add_argument("--seed-base", type=int, default=0,
                    help="added to every chunk's seed: other draws of the same scenarios")
    ap.add_argument("--budget", type=float, default=None,
                    help="the suites' alarm_budget (default: the product's, 0.05): the price of detection")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        for record in worker(json.loads(args.worker)):
            print(json.dumps(record), flush=True)
        return
    rules = args.rules.split(",")
    codes = {"before": checkout(args.reference) if "before" in rules else None, "single": REPO, "nightly": REPO}
    jobs = []
    for si, name in enumerate(args.scenarios.split(",")):
        for rule in rules:  # the same seed for every rule: the same draws, side by side
            chunks = max(1, min(args.jobs * 2, args.trials // 10 or 1))
            for c in range(chunks):
                trials = args.trials // chunks + (1 if c < args.trials % chunks else 0)
                jobs.append((name, rule, {"scenario": name, "rule": rule, "trials": trials,
                                          "seed": 1000 * si + c + args.seed_base, "budget": args.budget}))
    started = time.perf_counter()
    with ThreadPoolExecutor(args.jobs) as pool:
        done = list(pool.map(lambda j: (j[0], j[1], launch(codes[j[1]], j[2])), jobs))
    results: dict[tuple[str, str], list[dict]] = {}
    for name, rule, records in done:
        results.setdefault((name, rule), []).extend(records)
    budget = f"alarm_budget {args.budget}" if args.budget is not None else "the default alarm_budget"
    print(f"alarms: {args.trials} trials per scenario and rule, {WARM} warm-up nights, {budget}; "
          f"{time.perf_counter() - started:.0f} s, load {os.getloadavg()[0]:.1f}")
    print(f"'before' = the nightly rule at {args.reference}; red = regressed or below floor; "
          "Wilson 95 % intervals in brackets\n")
    for name in args.scenarios.split(","):
        scenario = SCENARIOS[name]
        floor = scenario.get("floor")
        print(f"## {name} ({scenario['n']} {scenario['kind']} cases, floor {floor if floor else 'off'}"
              f"{', lucky first run' if scenario.get('lucky') else ''})")
        for label, nights, drop, _ in scenario["phases"]:
            rows = {rule: summarise(results[(name, rule)], label, drop) for rule in rules}
            print(f"### {label}, {nights} nights")
            print(f"{'':30}" + "".join(f"{rule:>22}" for rule in rules))
            for key in next(iter(rows.values())):
                print(f"{key:30}" + "".join(f"{rows[rule][key]:>22}" for rule in rules))
        print()


if __name__ == "__main__":
    main()
