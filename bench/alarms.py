"""The alarm budget through real runs: false red nights per month and nights to detect a drop.

A nightly check is a test repeated every night, so a team lives with its false-alarm rate per
month. Every figure here comes from real runs — ``run_suite`` on a real suite file, a target
answering the scores this simulation drew, project scorers and a real SQLite history
(``bench/verdict_lab.py``'s project) — under three rules side by side, on the same draws:

* ``before``: the single-run rule of the reference commit (``--reference``, default f3594c2,
  the code before the alarm budget), run from a checkout of that commit in its own processes;
* ``single``: this checkout's single-run rule (what a one-off ``evalloop run`` says);
* ``nightly``: this checkout's nightly rule (``run --nightly``, scheduled fires: the CUSUM chart
  of :mod:`evalloop.verdicts.sequential` with the default alarm budget, 5 % per suite per 30 nights).

Scenarios: judge suites of 20 / 50 / 200 cases (quality q ~ Beta(6, 2), a night's grade
clip(q·(1 − drop) + N(0, 0.2), 0, 1)) and pass/fail suites of 20 / 50 cases (75 % of cases pass
with p = 0.97, 10 % with p = 0.05, 15 % are flaky at 0.6; a drop scales every pass rate). Each
trial is a new suite and history: 5 nights fill the baseline window, then

* 30 unchanged nights: P(≥ 1 false ``regressed`` in 30 nights) and false reds per 30 nights,
  and the same for false ``improved``;
* from the same saved history, 6 nights of a persistent drop at the scorer's threshold and at
  15 %: the share red by night 2, the mean night of the first red (of those caught within 6),
  and the share still red on night 5.

Floors are switched off (``min_score: 0``) so that only the drop rules are measured.
Usage: ``python bench/alarms.py [--trials 60] [--jobs 2] [--scenarios judge-50,passfail-20]``.
Seeds are fixed: a rerun gives the same table. Wilson 95 % intervals are printed beside each share.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
WARM, NIGHTS, DROP_NIGHTS, SD = 5, 30, 6, 0.2
SCENARIOS = {  # name: (kind, cases, threshold of the kind)
    "judge-20": ("judge", 20, 0.20), "judge-50": ("judge", 50, 0.20), "judge-200": ("judge", 200, 0.20),
    "passfail-20": ("pass-fail", 20, 0.10), "passfail-50": ("pass-fail", 50, 0.10),
}


# -- the worker: one rule, one scenario, in the process of the code it measures ---------------------
def worker(spec: dict) -> Iterator[dict]:
    """Trials of one scenario under one rule; one JSON-able record per trial."""
    import numpy as np
    import yaml
    from verdict_lab import Lab

    from evalloop import run_suite
    from evalloop.policy import VerdictPolicy

    kind, n, threshold = SCENARIOS[spec["scenario"]]
    nightly = spec["rule"] == "nightly"
    floors = "min_score" in VerdictPolicy.model_fields
    root = Path(tempfile.mkdtemp(prefix="alarms-"))
    lab = Lab(root, kind)

    def night(scores: dict[str, float]) -> str:
        suite = {"name": "lab", "target": {"ref": "sut:answers", "params": {"path": str(lab.answers)}},
                 "scorers": [{"name": kind, **({"min_score": 0} if floors else {})}],
                 "cases": [{"id": c, "input": {"id": c}} for c in scores]}
        (root / "fixtures" / "lab.yaml").write_text(yaml.safe_dump(suite, sort_keys=False))
        lab.answers.write_text(json.dumps(scores))
        extra = {"nightly": True} if nightly else {}
        report = run_suite("lab", settings=lab.settings, registry=lab.registry, services=lab.services, **extra)
        return report.comparison.scorers[0].status.value

    rng = np.random.default_rng(spec["seed"])
    for _ in range(spec["trials"]):
        if kind == "judge":
            q = rng.beta(6, 2, size=n)

            def draw(drop: float, q=q) -> dict[str, float]:
                return {f"c{i}": float(v) for i, v in enumerate(np.clip(q * (1 - drop) + rng.normal(0, SD, n), 0, 1))}
        else:
            p = np.array([0.97, 0.05, 0.6])[rng.choice(3, size=n, p=[0.75, 0.10, 0.15])]

            def draw(drop: float, p=p) -> dict[str, float]:
                return {f"c{i}": float(v) for i, v in enumerate(rng.random(n) < p * (1 - drop))}
        lab.reset()
        for _ in range(WARM):
            night(draw(0.0))
        snap = lab.save()
        record = {"unchanged": [night(draw(0.0)) for _ in range(NIGHTS)]}
        for label, drop in (("at threshold", threshold), ("15%", 0.15)):
            lab.restore(snap)
            record[label] = [night(draw(drop)) for _ in range(DROP_NIGHTS)]
        yield record


# -- the driver ------------------------------------------------------------------------------------
def wilson(k: int, n: int) -> tuple[float, float]:
    if not n:
        return 0.0, 1.0
    z, p = 1.96, k / n
    scale = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / scale
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / scale
    return max(0.0, centre - half), min(1.0, centre + half)


def share(k: int, n: int) -> str:
    lo, hi = wilson(k, n)
    return f"{k / n:6.1%} [{lo:.0%}–{hi:.0%}]" if n else "—"


def summarise(records: list[dict]) -> dict[str, str]:
    t = len(records)
    red = [sum(s == "regressed" for s in r["unchanged"]) for r in records]
    up = [sum(s == "improved" for s in r["unchanged"]) for r in records]
    out = {"P(false red in 30)": share(sum(x > 0 for x in red), t),
           "false reds / 30": f"{sum(red) / t:.2f}",
           "P(false improved in 30)": share(sum(x > 0 for x in up), t)}
    for label in ("at threshold", "15%"):
        firsts = [next((i + 1 for i, s in enumerate(r[label]) if s == "regressed"), None) for r in records]
        caught = [f for f in firsts if f is not None]
        out[f"{label}: red by night 2"] = share(sum(f is not None and f <= 2 for f in firsts), t)
        out[f"{label}: mean first red"] = f"{sum(caught) / len(caught):.2f}" if caught else "—"
        out[f"{label}: red on night 5"] = share(sum(r[label][4] == "regressed" for r in records), t)
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
    ap.add_argument("--reference", default="f3594c2", help="the commit whose single-run rule is 'before'")
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--rules", default="before,single,nightly")
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
            chunks = max(1, min(args.jobs, args.trials // 10 or 1))
            for c in range(chunks):
                trials = args.trials // chunks + (1 if c < args.trials % chunks else 0)
                jobs.append((name, rule, {"scenario": name, "rule": "nightly" if rule == "nightly" else "single",
                                          "trials": trials, "seed": 1000 * si + c}))
    started = time.perf_counter()
    with ThreadPoolExecutor(args.jobs) as pool:
        done = list(pool.map(lambda j: (j[0], j[1], launch(codes[j[1]], j[2])), jobs))
    results: dict[tuple[str, str], list[dict]] = {}
    for name, rule, records in done:
        results.setdefault((name, rule), []).extend(records)
    load = os.getloadavg()[0]
    print(f"alarms: {args.trials} trials per scenario and rule, {WARM} warm-up + {NIGHTS} unchanged nights, "
          f"{DROP_NIGHTS} drop nights; {time.perf_counter() - started:.0f} s, load {load:.1f}")
    print(f"'before' = the single-run rule at {args.reference}; Wilson 95 % intervals in brackets\n")
    for name in args.scenarios.split(","):
        kind, n, threshold = SCENARIOS[name]
        print(f"## {name} ({n} cases, threshold {threshold:.0%})")
        rows = {rule: summarise(results[(name, rule)]) for rule in rules}
        keys = list(next(iter(rows.values())))
        print(f"{'':28}" + "".join(f"{rule:>22}" for rule in rules))
        for key in keys:
            print(f"{key:28}" + "".join(f"{rows[rule][key]:>22}" for rule in rules))
        print()


if __name__ == "__main__":
    main()
