"""How far apart two drops are to *any* nightly rule: the Neyman–Pearson bound behind #36's targets.

Issue #36 asks, for the 50-case judge suite of ``bench/alarms.py``, that a 15 % drop be red by
night 2 in at least 90 % of trials, and that a drop of half the threshold (10 %) be red within
10 nights in at most 20 %. Whether both can hold is a question about the data, not the chart: a
rule that is red by night 2 has decided on nights 1 and 2, so it is a test of "10 %" against
"15 %" on those two nights, and no test does better than the likelihood ratio (Neyman–Pearson).

This bench gives that ratio every advantage a real rule lacks: it knows each case's true quality
``q``, the noise (σ = 0.2 before clipping) and both drop sizes exactly, so it needs no baseline
runs at all. Its grades are drawn as ``bench/alarms.py`` draws them — a night's grade is
clip(q·(1 − drop) + N(0, σ), 0, 1) with q ~ Beta(6, 2) — and clipped grades enter the ratio as
the probability mass at 0 or 1. The cut-off is set so the ratio is red by night 2 on 90 % of the
15 % drops; the share of 10 % drops it then calls red by night 2 is the smallest any rule can
have. Red *within 10 nights* includes red by night 2, so a rule that meets the first target is
red within 10 nights on at least that share of half-threshold drops.

Usage: ``python bench/separation.py [--trials 20000] [--cases 50] [--power 0.9]``. Seeded; prints
the cut-off's power, the bound with its Wilson 95 % interval, and the same for 200 cases.
"""

from __future__ import annotations

import argparse

import numpy as np
from intervals import wilson  # bench/ is the script's folder
from scipy.stats import norm

SD = 0.2


def llr(grades: np.ndarray, q: np.ndarray, high: float, low: float) -> np.ndarray:
    """The log-likelihood ratio of a drop of ``high`` against ``low`` for each trial's grades
    (trials × cases × nights; ``q``: trials × cases), clipping included."""
    mu_h, mu_l = (q * (1 - high))[..., None], (q * (1 - low))[..., None]
    inside = norm.logpdf(grades, mu_h, SD) - norm.logpdf(grades, mu_l, SD)
    at_zero = norm.logcdf(-mu_h / SD) - norm.logcdf(-mu_l / SD)
    at_one = norm.logsf((1 - mu_h) / SD) - norm.logsf((1 - mu_l) / SD)
    each = np.where(grades <= 0.0, at_zero, np.where(grades >= 1.0, at_one, inside))
    return each.sum(axis=(1, 2))


def bound(trials: int, cases: int, power: float, seed: int = 0, nights: int = 2,
          high: float = 0.15, low: float = 0.10) -> tuple[float, float]:
    """(power reached, share of ``low`` drops red) of the best test on ``nights`` nights."""
    rng = np.random.default_rng(seed)

    def draw(drop: float) -> np.ndarray:
        q = rng.beta(6, 2, (trials, cases))
        grades = np.clip(q[..., None] * (1 - drop) + rng.normal(0, SD, (trials, cases, nights)), 0, 1)
        return llr(grades, q, high, low)

    under_high, under_low = draw(high), draw(low)
    cut = float(np.quantile(under_high, 1 - power))
    return float(np.mean(under_high >= cut)), float(np.mean(under_low >= cut))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=20000)
    parser.add_argument("--cases", type=int, default=50)
    parser.add_argument("--power", type=float, default=0.9)
    args = parser.parse_args()
    print(f"best possible test on nights 1-2 (knows every case's quality), {args.trials} trials a drop")
    print(f"{'cases':>6} {'15% red by night 2':>19} {'10% red by night 2 (at least)':>31}")
    for cases in sorted({args.cases, 200}):
        reached, share = bound(args.trials, cases, args.power)
        low, high = wilson(round(share * args.trials), args.trials)
        print(f"{cases:>6} {reached:>19.1%} {share:>12.1%} [{low:.1%}–{high:.1%}]")


if __name__ == "__main__":
    main()
