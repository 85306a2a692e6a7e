"""Early stop by simulation: judge calls saved, false alarms and detection beside judging every case.

A 200-case ``llm_judge`` suite: each case has a true quality (Beta, mean ``--mean`` 0.8, of
concentration 10), and a judge
grades it with noise (``--noise``, default 0.08) in whole points (0–100, as ``llm-rubric``).
Five earlier runs make the window. The current run is unchanged, or every case's quality drops by
``δ`` (relative). Each trial judges the same grades two ways: **all** cases, and with
**early stop** (4 looks, O'Brien–Fleming, ``evalloop.verdicts.early_stop.look`` at each look on
the cases judged so far, in a random order); both verdicts come from
``evalloop.verdicts.verdict.decide`` with the llm_judge defaults (threshold 20 %, floor 70 %).
Reported: how often the run fails (regressed or below floor: a false alarm when unchanged,
detection otherwise), how often it is ``regressed``, with 95 % Wilson intervals; the judge calls
the early-stop run made; and how often the two verdicts agree.

``--window early`` makes the window of runs that stopped early themselves (each judged a random
quarter of the cases), as a nightly suite's window becomes once every night stops at look 1.

    python bench/early_stop.py                          # 400 trials a scenario
    python bench/early_stop.py --trials 200 --window early
    python bench/early_stop.py --mean 0.73            # near the floor: unchanged runs fail by chance
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import intervals  # bench/ is the script's folder
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from evalloop.policy import VerdictPolicy  # noqa: E402
from evalloop.verdicts.early_stop import look  # noqa: E402
from evalloop.verdicts.verdict import VerdictStatus, decide  # noqa: E402

CASES, WINDOW, LOOKS = 200, 5, 4
POLICY = VerdictPolicy(threshold=0.20, min_score=0.70, permutations=2000, resamples=1000)


def grades(rng: np.random.Generator, quality: np.ndarray, noise: float) -> np.ndarray:
    return np.round(np.clip(quality + rng.normal(0.0, noise, quality.size), 0.0, 1.0) * 100) / 100


def trial(rng: np.random.Generator, drop: float, noise: float, early_window: bool,
          mean: float = 0.8) -> tuple[str, str, int]:
    quality = rng.beta(10 * mean, 10 * (1 - mean), CASES)
    ids = [f"c{i:03d}" for i in range(CASES)]
    window = []
    for _ in range(WINDOW):
        run = grades(rng, quality, noise)
        keep = rng.permutation(CASES)[:CASES // LOOKS] if early_window else np.arange(CASES)
        window.append({ids[i]: float(run[i]) for i in keep})
    now = grades(rng, quality * (1.0 - drop), noise)
    full = decide(dict(zip(ids, now.tolist(), strict=True)), window, POLICY, binary=False).status
    sums: dict[str, list[float]] = {}
    for run_scores in window:
        for c, v in run_scores.items():
            sums.setdefault(c, []).append(v)
    means = {c: sum(v) / len(v) for c, v in sums.items()}
    order = rng.permutation(CASES)
    size = math.ceil(CASES / LOOKS)
    judged = CASES
    for k in range(1, LOOKS):
        seen = order[:k * size]
        shared = [i for i in seen if ids[i] in means]
        diffs = np.array([means[ids[i]] - now[i] for i in shared])
        base = float(np.mean([means[ids[i]] for i in shared])) if shared else 0.0
        if look(k, LOOKS, diffs, base, now[seen], POLICY).stop is not None:
            judged = k * size
            break
    subset = {ids[i]: float(now[i]) for i in order[:judged]}
    early = full if judged == CASES else decide(subset, window, POLICY, binary=False).status
    return full, early, judged


def wilson(hits: int, n: int) -> str:
    """A share with its Wilson 95 % interval, in percent."""
    if n == 0:
        return "—"
    lo, hi = intervals.wilson(hits, n)
    return f"{100 * hits / n:5.1f} % [{100 * lo:4.1f}–{100 * hi:5.1f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=400)
    parser.add_argument("--noise", type=float, default=0.08, help="the judge's grading noise (sd, 0–1 scale)")
    parser.add_argument("--drops", type=float, nargs="*", default=[0.0, 0.10, 0.20, 0.30])
    parser.add_argument("--window", choices=["full", "early"], default="full")
    parser.add_argument("--mean", type=float, default=0.8, help="the cases' mean quality (the floor is 0.70)")
    parser.add_argument("--seed", type=int, default=39)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    print(f"{CASES} judged cases of mean quality {args.mean}, window of {WINDOW} {args.window} runs, judge noise "
          f"{args.noise}, {LOOKS} looks "
          f"(O'Brien–Fleming), llm_judge defaults (threshold 20 %, floor 70 %); {args.trials} trials a row")
    print(f"{'drop':>5} {'design':<10} {'fails (95 % CI)':>24} {'regressed (95 % CI)':>24} {'judge calls':>12} "
          f"{'saved':>6} {'agree':>6}")
    for drop in args.drops:
        got = [trial(rng, drop, args.noise, args.window == "early", args.mean) for _ in range(args.trials)]
        for label, pick, calls in (("all cases", 0, None), ("early stop", 1, 2)):
            statuses = [g[pick] for g in got]
            fails = sum(VerdictStatus(s).fails for s in statuses)
            regressed = sum(s == VerdictStatus.REGRESSED for s in statuses)
            made = CASES if calls is None else float(np.mean([g[2] for g in got]))
            agree = "" if calls is None else f"{100 * np.mean([g[0] == g[1] for g in got]):5.1f}%"
            print(f"{drop:>5.0%} {label:<10} {wilson(fails, len(got)):>24} {wilson(regressed, len(got)):>24} "
                  f"{made:>12.1f} {100 * (1 - made / CASES):>5.1f}% {agree:>6}")
    print("fails: regressed or below floor (unchanged: a false alarm; dropped: detected)")


if __name__ == "__main__":
    main()
