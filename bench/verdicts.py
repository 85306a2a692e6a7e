"""Verdicts through real runs: false alarms and detection per rule, with Wilson 95 % CIs.

Every number comes from real runs: ``run_suite`` on a real suite file, a target answering the
scores this simulation drew, project scorers and a real SQLite history (``bench/verdict_lab.py``).
Each trial draws a suite, runs its window of earlier runs, then judges one current run under each
rule (``evidence``, the default; ``threshold``; ``paired``) against that same saved window. A run
counts as flagged when its verdict fails CI (exit 1: ``regressed``); the baseline-0 rise counts
``improved``. Scenarios (issue #11):

* pass/fail mix: 75 % of cases pass with p = 0.97, 10 % with p = 0.05, 15 % are flaky at 0.6;
* Beta(4,1): each case's pass rate drawn from Beta(4, 1);
* judge: case quality q ~ Beta(6, 2), a run's grade clip(q·(1 − drop) + N(0, 0.2), 0, 1);
* changed cases: a 10-case pass/fail mix, then 10 harder cases (pass rate U(0, 0.4)) added, or
  5 of the 10 replaced by harder ones, with no change in quality;
* baseline 0: 20 cases failing every earlier run, then passing with p = 0.9 (a real rise); and
  per-case pass rates of 0.01 with no change.

``oracle`` is the best detection possible at the rules' level: a z-test of the paired mean
difference that knows every case's true run-to-run variance, flagging at the drop side of a
two-sided 5 % (one-sided 2.5 %), on the same draws. The MDD rows bisect the true quality drop the
default rule catches 90 % of the time, through runs (common random numbers across steps), beside
the MDD the verdicts report (median over trials, a relative drop of the observed mean) and the
oracle's; "observed" converts the true drop into the observed mean's drop (clipping at 1 hides
part of a quality drop).

Usage: ``python bench/verdicts.py [--trials 20] [--workers 2] [--windows 1,5] [--sizes 20,50,200]``
(40 trials: about 7 CPU-minutes over 2 workers, 19 min on a shared 2-core machine at load 12;
the time grows linearly with ``--trials``). Seeds are fixed: a rerun gives the same table.
"""

from __future__ import annotations

import argparse
import math
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy.stats import binomtest, norm

sys.path.insert(0, str(Path(__file__).parent))
from verdict_lab import Lab  # noqa: E402

from evalloop.verdicts.verdict import VerdictStatus  # noqa: E402

RULES = ("evidence", "threshold", "paired")
Z = float(norm.ppf(0.975))
SD = 0.2  # judge run noise
Gen = Callable[[int, np.random.Generator], np.ndarray]


@dataclass
class Row:
    """One scenario at one truth: how many trials each rule (and the oracle) flagged."""

    scenario: str
    truth: str
    n: int
    window: int
    alarm: bool  # True: flagging is a false alarm (target ≤ 5 %); False: a detection
    trials: int = 0
    hits: dict[str, int] = field(default_factory=lambda: dict.fromkeys((*RULES, "oracle"), 0))


@dataclass
class Mdd:
    n: int
    true_drop: float  # bisected, default rule
    observed: float  # the same drop, as a relative drop of the observed mean
    reported: float  # median MDD the verdicts reported
    oracle: float  # the oracle's 90 % drop (true quality)
    oracle_observed: float


def mix(n: int, rng: np.random.Generator) -> np.ndarray:
    return np.array([0.97, 0.05, 0.6])[rng.choice(3, size=n, p=[0.75, 0.10, 0.15])]


def beta41(n: int, rng: np.random.Generator) -> np.ndarray:
    return rng.beta(4, 1, size=n)


def scores(values: np.ndarray, prefix: str = "c") -> dict[str, float]:
    return {f"{prefix}{i}": float(v) for i, v in enumerate(values)}


def oracle_z(x: np.ndarray, window: np.ndarray, var: np.ndarray) -> float:
    """The paired mean difference over its true standard error (window: cases × runs)."""
    total = float((x - window.mean(axis=1)).sum())
    v = float(np.sum(var * (1.0 + 1.0 / window.shape[1])))
    if v <= 0:
        return math.copysign(math.inf, total) if total else 0.0
    return total / math.sqrt(v)


def censored_var(q: np.ndarray, sd: float) -> np.ndarray:
    """Var(clip(q + N(0, sd), 0, 1)) per case: a judge's true run-to-run variance."""
    a, b = (0.0 - q) / sd, (1.0 - q) / sd
    mid = norm.cdf(b) - norm.cdf(a)
    m1 = (1 - norm.cdf(b)) + q * mid + sd * (norm.pdf(a) - norm.pdf(b))
    m2 = (1 - norm.cdf(b)) + (q * q + sd * sd) * mid + sd * (q * norm.pdf(a) - (1 + q) * norm.pdf(b))
    return np.maximum(m2 - m1 * m1, 0.0)


def judge_all(lab: Lab, row: Row, current: dict[str, float], oracle: bool, snap: object,
              want: VerdictStatus | None = None) -> list:
    """The current run judged under every rule against the saved window; the comparisons."""
    row.trials += 1
    row.hits["oracle"] += oracle
    out = []
    for rule in RULES:
        lab.restore(snap)
        s = lab.run(current, rule=rule)
        row.hits[rule] += s.status is want if want else s.fails
        out.append(s)
    return out


def passfail_job(lab: Lab, rng: np.random.Generator, trials: int, name: str, gen: Gen, n: int,
                 window: int, drops: tuple[float, ...]) -> list[Row]:
    rows = [Row(name, "no change" if d == 0 else f"{d:.0%} drop", n, window, d == 0) for d in drops]
    for _ in range(trials):
        p = gen(n, rng)
        lab.reset()
        runs = np.array([(rng.random(n) < p).astype(float) for _ in range(window)]).T
        for w in runs.T:
            lab.run(scores(w))
        snap = lab.save()
        for row, d in zip(rows, drops, strict=True):
            x = (rng.random(n) < p * (1 - d)).astype(float)
            judge_all(lab, row, scores(x), oracle_z(x, runs, p * (1 - p)) < -Z, snap)
    return rows


def judge_job(lab: Lab, rng: np.random.Generator, trials: int, n: int, steps: int) -> tuple[list[Row], Mdd]:
    window = 5
    rows = [Row("judge, sd 0.2", t, n, window, t == "no change") for t in ("no change", "15% drop")]
    kept: list[tuple[object, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
    reported: list[float] = []
    for _ in range(trials):
        q = rng.beta(6, 2, size=n)
        lab.reset()
        runs = np.clip(q[:, None] + rng.normal(0, SD, size=(n, window)), 0, 1)
        for w in runs.T:
            lab.run(scores(w))
        snap = lab.save()
        eps, var = rng.normal(0, SD, size=n), censored_var(q, SD)
        for row, d in zip(rows, (0.0, 0.15), strict=True):
            x = np.clip(q * (1 - d) + eps, 0, 1)
            out = judge_all(lab, row, scores(x), oracle_z(x, runs, var) < -Z, snap)
            if d == 0 and out[0].mdd is not None:
                reported.append(out[0].mdd)
        kept.append((snap, q, eps, runs, var))

    def observed(d: float) -> float:
        base = np.mean([np.clip(q + e, 0, 1).mean() for _, q, e, _, _ in kept])
        now = np.mean([np.clip(q * (1 - d) + e, 0, 1).mean() for _, q, e, _, _ in kept])
        return float((base - now) / base)

    def bisect(rate: Callable[[float], float], k: int) -> float:
        low, high = 0.0, 0.6
        for _ in range(k):
            mid = (low + high) / 2
            low, high = (low, mid) if rate(mid) >= 0.9 else (mid, high)
        return (low + high) / 2

    def by_runs(d: float) -> float:
        flagged = 0
        for snap, q, eps, _, _ in kept:
            lab.restore(snap)
            flagged += lab.run(scores(np.clip(q * (1 - d) + eps, 0, 1))).fails
        return flagged / len(kept)

    def by_oracle(d: float) -> float:
        return float(np.mean([oracle_z(np.clip(q * (1 - d) + e, 0, 1), r, v) < -Z
                              for _, q, e, r, v in kept]))

    true_drop, oracle = bisect(by_runs, steps), bisect(by_oracle, 20)
    mdd = Mdd(n, true_drop, observed(true_drop), float(np.median(reported)) if reported else math.nan,
              oracle, observed(oracle))
    return rows, mdd


def changed_job(lab: Lab, rng: np.random.Generator, trials: int) -> list[Row]:
    window = 5
    added = Row("changed cases: 10 harder added", "no change", 20, window, True)
    replaced = Row("changed cases: 5 of 10 replaced", "no change", 10, window, True)
    for _ in range(trials):
        p, hard = mix(10, rng), rng.uniform(0, 0.4, size=10)
        lab.reset()
        runs = np.array([(rng.random(10) < p).astype(float) for _ in range(window)]).T
        for w in runs.T:
            lab.run(scores(w))
        snap = lab.save()
        x, h = (rng.random(10) < p).astype(float), (rng.random(10) < hard).astype(float)
        ok = oracle_z(x, runs, p * (1 - p)) < -Z
        judge_all(lab, added, {**scores(x), **scores(h, "h")}, ok, snap)
        ok5 = oracle_z(x[:5], runs[:5], (p * (1 - p))[:5]) < -Z  # on the 5 shared cases
        judge_all(lab, replaced, {**scores(x[:5]), **scores(h[:5], "h")}, ok5, snap)
    return [added, replaced]


def zero_job(lab: Lab, rng: np.random.Generator, trials: int) -> list[Row]:
    n, window = 20, 5
    rise = Row("baseline 0 → pass rate 0.9", "a real rise", n, window, False)
    near = Row("baseline 0.01 (pass rate 0.01)", "no change", n, window, True)
    lab.reset()
    for _ in range(window):
        lab.run(scores(np.zeros(n)))
    zero = lab.save()  # every earlier run failed every case: one window serves every trial
    for _ in range(trials):
        x = (rng.random(n) < 0.9).astype(float)
        judge_all(lab, rise, scores(x), oracle_z(x, np.zeros((n, window)), np.zeros(n)) > Z, zero,
                  want=VerdictStatus.IMPROVED)
    for _ in range(trials):
        p = np.full(n, 0.01)
        lab.reset()
        runs = np.array([(rng.random(n) < p).astype(float) for _ in range(window)]).T
        for w in runs.T:
            lab.run(scores(w))
        x = (rng.random(n) < p).astype(float)
        judge_all(lab, near, scores(x), oracle_z(x, runs, p * (1 - p)) < -Z, lab.save())
    return [rise, near]


def job(spec: tuple) -> tuple[list[Row], Mdd | None, str, float]:
    kind, seed, trials, tmp, *params = spec
    started = time.perf_counter()
    root = Path(tempfile.mkdtemp(prefix="verdicts-", dir=tmp))
    rng = np.random.default_rng(seed)
    try:
        if kind == "judge":
            n, steps = params
            rows, mdd = judge_job(Lab(root, "judge"), rng, trials, n, steps)
            return rows, mdd, f"judge n={n}", time.perf_counter() - started
        lab = Lab(root, "pass-fail")
        if kind == "passfail":
            name, n, window, drops = params
            rows = passfail_job(lab, rng, trials, name, {"pass/fail mix": mix, "Beta(4,1) pass rates": beta41}[name],
                                n, window, drops)
        else:
            rows = changed_job(lab, rng, trials) if kind == "changed" else zero_job(lab, rng, trials)
        return rows, None, f"{kind} {params}", time.perf_counter() - started
    finally:
        shutil.rmtree(root, ignore_errors=True)


def cell(k: int, n: int) -> str:
    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    return f"{100 * k / n:.1f} % [{100 * ci.low:.0f}–{100 * ci.high:.0f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20, help="trials per scenario")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--windows", default="1,5", help="earlier runs for the pass/fail scenarios")
    parser.add_argument("--mdd-steps", type=int, default=6, help="bisection steps through runs")
    parser.add_argument("--sizes", default="20,50,200", help="judge suite sizes")
    parser.add_argument("--only", choices=("judge", "passfail", "changed", "zero"), action="append",
                        help="run only these scenario kinds (repeatable)")
    a = parser.parse_args()
    shm = Path("/dev/shm")
    tmp = tempfile.mkdtemp(prefix="evalloop-verdicts-", dir=shm if shm.is_dir() else None)
    specs: list[tuple] = [("judge", 0, a.trials, tmp, int(n), a.mdd_steps) for n in reversed(a.sizes.split(","))]
    for w in map(int, a.windows.split(",")):
        specs += [("passfail", 0, a.trials, tmp, name, 20, w, (0.0,))
                  for name in ("pass/fail mix", "Beta(4,1) pass rates")]
    specs += [("passfail", 0, a.trials, tmp, "pass/fail mix", 50, 5, (0.0, 0.15)),
              ("changed", 0, a.trials, tmp), ("zero", 0, a.trials, tmp)]
    specs = [(s[0], 1000 + i, *s[2:]) for i, s in enumerate(specs) if not a.only or s[0] in a.only]
    t0 = time.perf_counter()
    rows: list[Row] = []
    mdds: list[Mdd] = []
    try:
        with ProcessPoolExecutor(max_workers=a.workers) as pool:
            for got, mdd, label, spent in pool.map(job, specs):
                print(f"  {label}: {spent:.0f} s", file=sys.stderr)
                rows += got
                mdds += [mdd] if mdd else []
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    elapsed = time.perf_counter() - t0
    rows.sort(key=lambda r: (not r.alarm, r.scenario, r.window, r.n))
    print(f"{a.trials} trials per row through real runs (run_suite, suite files, SQLite history); "
          "share of runs flagged `regressed` (exit 1) — `improved` for the rise — with Wilson 95 % CIs.\n")
    print("| scenario | truth | cases | earlier runs | evidence (default) | threshold | paired | oracle |")
    print("|---|---|---:|---:|---|---|---|---|")
    for r in rows:
        cells = " | ".join(cell(r.hits[k], r.trials) for k in (*RULES, "oracle"))
        print(f"| {r.scenario} | {r.truth} | {r.n} | {r.window} | {cells} |")
    if mdds:
        print("\nMinimal detectable drop (90 % detection), judge sd 0.2, 5 earlier runs, default rule:\n")
        print("| cases | through runs: true drop | as observed drop | reported by the verdict (median) "
              "| oracle: true drop | oracle: observed |")
        print("|---:|---:|---:|---:|---:|---:|")
        for m in sorted(mdds, key=lambda m: m.n):
            print(f"| {m.n} | {m.true_drop:.1%} | {m.observed:.1%} | {m.reported:.1%} | "
                  f"{m.oracle:.1%} | {m.oracle_observed:.1%} |")
    print()
    for rule in RULES if any(r.alarm for r in rows) else ():
        worst = max((r for r in rows if r.alarm), key=lambda r: r.hits[rule] / r.trials)
        rate = worst.hits[rule] / worst.trials
        print(f"worst false alarm, {rule:<9}: {rate:6.1%} ({worst.scenario}, {worst.window} earlier runs) — "
              f"{'meets' if rate <= 0.05 else 'misses'} the 5 % bar")
    for r in rows:
        if r.scenario.startswith("judge") and r.n == 50 and not r.alarm:
            det = r.hits["evidence"] / r.trials
            print(f"default rule, true 15 % drop, 50 judge cases, sd 0.2: {det:.1%} — "
                  f"{'meets' if det >= 0.9 else 'misses'} the 90 % bar (oracle {r.hits['oracle'] / r.trials:.1%})")
    print(f"elapsed {elapsed:.0f} s")


if __name__ == "__main__":
    main()
