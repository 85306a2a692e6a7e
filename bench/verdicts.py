"""Simulation with known truth: false alarms and detection of the ADR rule vs evalloop's verdicts.

Each replicate draws a suite, five window runs and one current run whose true quality dropped by
0 %, 10 %, 15 % or 25 %, then asks ``evalloop.verdict.decide`` for three verdicts:

* ``ADR``: the ADR rule alone (relative drop of the mean ≥ threshold);
* ``ADR+sig``: the ADR rule with ``require_significance = true``;
* ``paired``: evalloop's ``rule="paired"`` (paired drop significant at a two-sided 5 % and at
  least a third of the threshold).

Judge suites: each case has a stable quality q ~ Beta(6, 2) (mean 0.75); a run's score is
clip(q · (1 − drop) + N(0, sd), 0, 1) for judge noise sd 0.1 / 0.2 / 0.3; threshold 20 %.
Pass/fail suites: 75 % of cases pass with p = 0.97, 10 % with p = 0.05, 15 % are flaky at
p = 0.6; the current run passes with p · (1 − drop); threshold 10 %. ``MDD`` is
``stats.minimal_detectable_drop`` for the paired rule at 90 % power, and ``@MDD`` the simulated
detection of the paired rule at a true drop of that size. For judge suites the MDD is in
observed-score units; clipping at 1 hides part of a quality drop, so ``@MDD`` sits a little
under 90 % there.

Usage: ``python bench/verdicts.py [--reps 1000] [--permutations 2000] [--workers 2]``.
"""

from __future__ import annotations

import argparse
import math
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np

from evalloop import stats
from evalloop.verdict import VerdictPolicy, VerdictStatus, decide

DROPS = (0.0, 0.10, 0.15, 0.25)
WINDOW = 5


@dataclass(frozen=True)
class Scenario:
    kind: str  # "judge" or "pass/fail"
    n: int
    sd: float  # judge noise sd; 0 for pass/fail
    threshold: float


def _suite(s: Scenario, rng: np.random.Generator) -> np.ndarray:
    if s.kind == "judge":
        return rng.beta(6, 2, size=s.n)
    kinds = rng.choice(3, size=s.n, p=[0.75, 0.10, 0.15])
    return np.array([0.97, 0.05, 0.6])[kinds]


def _run(s: Scenario, q: np.ndarray, drop: float, rng: np.random.Generator) -> dict[str, float]:
    level = q * (1.0 - drop)
    if s.kind == "judge":
        scores = np.clip(level + rng.normal(0.0, s.sd, size=s.n), 0.0, 1.0)
    else:
        scores = (rng.random(s.n) < level).astype(float)
    return {f"c{i}": float(v) for i, v in enumerate(scores)}


def _mdd(s: Scenario, min_effect: float) -> float:
    """The paired rule's minimal detectable drop under this scenario's own noise."""
    if s.kind == "judge":
        q = np.random.default_rng(1).beta(6, 2, size=100_000)
        mean, sd = float(q.mean()), s.sd
    else:
        p = np.array([0.97, 0.05, 0.6])
        w = np.array([0.75, 0.10, 0.15])
        mean, sd = float(w @ p), math.sqrt(float(w @ (p * (1 - p))))
    mdd = stats.minimal_detectable_drop(
        s.n, mean, case_sd=sd, binary=s.kind != "judge", min_effect=min_effect
    )
    return float(mdd or 1.0)


def simulate(args: tuple[Scenario, int, int, int]) -> dict:
    """Rates for one scenario over ``reps`` replicates at each drop and at its MDD."""
    s, reps, permutations, seed = args
    rng = np.random.default_rng(seed)
    common = dict(threshold=s.threshold, permutations=permutations, resamples=100)
    adr = VerdictPolicy(**common)
    paired = VerdictPolicy(rule="paired", **common)
    mdd = _mdd(s, paired.effective_min_effect)
    rates: dict[str, dict[float, float]] = {"ADR": {}, "ADR+sig": {}, "paired": {}}
    for drop in (*DROPS, mdd):
        hits = {"ADR": 0, "ADR+sig": 0, "paired": 0}
        for _ in range(reps):
            q = _suite(s, rng)
            window = [_run(s, q, 0.0, rng) for _ in range(WINDOW)]
            current = _run(s, q, drop, rng)
            v = decide(current, window, adr)
            hits["ADR"] += v.threshold_met
            hits["ADR+sig"] += v.status is VerdictStatus.REGRESSED
            hits["paired"] += decide(current, window, paired).is_regression
        for name, count in hits.items():
            rates[name][drop] = count / reps
    return {"scenario": s, "rates": rates, "mdd": mdd}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=1000)
    parser.add_argument("--permutations", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=2)
    a = parser.parse_args()
    scenarios = [Scenario("judge", n, sd, 0.20) for sd in (0.1, 0.2, 0.3) for n in (20, 50, 200)]
    scenarios += [Scenario("pass/fail", n, 0.0, 0.10) for n in (20, 50, 200)]
    jobs = [(s, a.reps, a.permutations, 1000 + i) for i, s in enumerate(scenarios)]
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=a.workers) as pool:
        results = list(pool.map(simulate, jobs))
    elapsed = time.perf_counter() - t0

    print(f"{a.reps} replicates per cell, window {WINDOW} runs, {a.permutations} permutations, "
          f"alpha 0.05; rates are shares of replicates flagged as a regression.")
    head = "  ".join(f"{int(d * 100):>4d}%" for d in DROPS)
    print(f"{'suite (threshold)':<28} {'verdict':<8} {head}   {'MDD':>6} {'@MDD':>6}")
    worst_fa = {"ADR": 0.0, "ADR+sig": 0.0, "paired": 0.0}
    for r in results:
        s = r["scenario"]
        label = (f"judge sd {s.sd:.1f}, n={s.n}" if s.kind == "judge" else f"pass/fail, n={s.n}")
        label += f" (t {int(s.threshold * 100)}%)"
        for name, by_drop in r["rates"].items():
            worst_fa[name] = max(worst_fa[name], by_drop[0.0])
            cells = "  ".join(f"{100 * by_drop[d]:5.1f}" for d in DROPS)
            tail = (f"   {100 * r['mdd']:5.1f}% {100 * by_drop[r['mdd']]:5.1f}"
                    if name == "paired" else "")
            print(f"{label:<28} {name:<8} {cells}{tail}")
            label = ""
    print()
    for name, fa in worst_fa.items():
        print(f"worst false-alarm rate at 0% drop, {name:<8}: {100 * fa:5.1f}%  "
              f"({'meets' if fa <= 0.05 else 'misses'} the 5% target)")
    target = next(r for r in results if r["scenario"] == Scenario("judge", 50, 0.2, 0.20))
    det = target["rates"]["paired"][0.15]
    print(f"paired detection at a true 15% drop, judge sd 0.2, n=50: {100 * det:.1f}% "
          f"({'meets' if det >= 0.9 else 'misses'} the 90% target); "
          f"ADR rule: {100 * target['rates']['ADR'][0.15]:.1f}%")
    print(f"elapsed {elapsed:.1f} s")


if __name__ == "__main__":
    main()
