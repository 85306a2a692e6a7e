"""A judge change through real runs: how often it is read as a product regression, and whether a
product regression made in the same run is still caught — three ways of handling it side by side.

Every figure comes from real runs (``run_suite`` on a real suite file, a project target and a
project ``llm_judge`` scorer, a real SQLite history). The simulated judge grades an output of
quality ``q`` as ``clip(q + bias + N(0, 0.15))``, the noise drawn from a hash of the output and
the judge model (the same output and model always get the same grade, as a judge at temperature
0 behind the response cache); the new judge is harsher (bias −0.2 against 0: about 27 % lower on
these outputs, past the judge's 20 % threshold). A suite of 50 cases of quality ``Beta(6, 2)``;
each night's output quality is ``q·(1 − drop) + N(0, 0.05)``. Five nights under the old judge
fill the baseline, then one night under the new judge with the product unchanged (``drop`` 0) or
30 % worse, from the same saved history:

* ``span`` — what evalloop did before: the judge change is noticed but the baseline spans both
  judges (here the judge model is set where the fingerprint does not see it);
* ``bridge`` — this checkout's default: the five baseline runs are re-graded by the new judge;
* ``restart`` — ``--no-bridge``: the judge's baseline restarts at the change.

Printed per rule: the share of trials whose judge-change night is ``regressed`` with the product
unchanged (false alarms) and with the 30 % drop (caught), with Wilson 95 % intervals, and the
outputs the bridge re-graded per trial (a real judge: that many judge calls). Seeds are fixed: a
rerun gives the same table.
Usage: ``python bench/judge_change.py [--trials 100]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import tempfile
import textwrap
import time
from contextlib import closing
from pathlib import Path

import numpy as np
import yaml
from intervals import wilson  # bench/ is the script's folder

CASES, NIGHTS, SD, PRODUCT_SD, DROP = 50, 5, 0.15, 0.05, 0.30
BIAS = {"old-judge": 0.0, "new-judge": -0.2}
RULES = ("span", "bridge", "restart")

TARGET = '''
import json

def answer(input, path):
    """This night's output of the case: its quality, and the night (outputs differ night to night)."""
    with open(path) as f:
        night = json.load(f)
    return {"quality": night["q"][input["id"]], "night": night["n"]}
'''

SCORERS = '''
import hashlib, os
import numpy as np
from evalloop import Score, scorer

BIAS = {"old-judge": 0.0, "new-judge": -0.2}

@scorer("judge", kind="llm_judge", min_score=0)
def judge(input, output, expected, model=None):
    """A simulated judge: quality + the model's bias + noise fixed by the output and the model."""
    model = model or os.environ["BENCH_JUDGE"]  # the 'span' rule: a model the fingerprint does not see
    seed = int(hashlib.sha256(f"{output}|{model}".encode()).hexdigest()[:8], 16)
    noise = np.random.default_rng(seed).normal(0.0, 0.15)
    return Score(value=float(min(1.0, max(0.0, output["quality"] + BIAS[model] + noise))))
'''



class Project:
    """One project, one suite, one history; nights go through ``run_suite``."""

    def __init__(self, root: Path) -> None:
        from evalloop import load_settings
        from evalloop.scoring.registry import discover

        self.root = root
        (root / "fixtures").mkdir(parents=True)
        (root / "scorers").mkdir()
        (root / "sut.py").write_text(textwrap.dedent(TARGET))
        (root / "scorers" / "judge.py").write_text(textwrap.dedent(SCORERS))
        (root / "evalloop.toml").write_text("run_log = false\nlearn = false\ninject_failures = false\n")
        self.night_file = root / "night.json"
        self.settings = load_settings(root)
        self.registry = discover(root)
        self.db = root / "history" / "evalloop.db"

    def night(self, n: int, quality: dict[str, float], model: str, rule: str) -> tuple[str, int]:
        """One night's run: its judge verdict and the judge calls its bridge made."""
        from evalloop import RunOptions, run_suite

        entry: dict = {"name": "judge"}
        if rule == "span":
            os.environ["BENCH_JUDGE"] = model
        else:
            entry["params"] = {"model": model}
        suite = {"name": "judged", "holdout": 0, "window": 5,
                 "target": {"ref": "sut:answer", "params": {"path": str(self.night_file)}},
                 "scorers": [entry], "cases": [{"id": c, "input": {"id": c}} for c in quality]}
        (self.root / "fixtures" / "judged.yaml").write_text(yaml.safe_dump(suite, sort_keys=False))
        self.night_file.write_text(json.dumps({"q": quality, "n": n}))
        report = run_suite("judged", RunOptions(bridge=rule != "restart"),
                           settings=self.settings, registry=self.registry)
        calls = sum(len(r["runs"]) for r in [report.extras.get("bridge") or {"runs": []}]) * len(quality)
        return report.comparison.scorers[0].status.value, calls

    def save(self) -> sqlite3.Connection:
        snapshot = sqlite3.connect(":memory:")
        with closing(sqlite3.connect(self.db)) as source:
            source.backup(snapshot)
        return snapshot

    def restore(self, snapshot: sqlite3.Connection) -> None:
        """Put the saved history back (the evalloop engine's own connections see it at once)."""
        with closing(sqlite3.connect(self.db)) as target:
            snapshot.backup(target)


def trial(seed: int, rule: str) -> dict[str, object]:
    rng = np.random.default_rng(seed)
    base = rng.beta(6, 2, CASES)
    ids = [f"c{i:02d}" for i in range(CASES)]

    def quality(drop: float) -> dict[str, float]:
        values = np.clip(base * (1 - drop) + rng.normal(0, PRODUCT_SD, CASES), 0, 1)
        return dict(zip(ids, map(float, values), strict=True))

    nights = [quality(0.0) for _ in range(NIGHTS)]
    last = {drop: quality(drop) for drop in (0.0, DROP)}
    with tempfile.TemporaryDirectory(prefix="judge-change-") as tmp:
        project = Project(Path(tmp))
        for n, q in enumerate(nights):
            project.night(n, q, "old-judge", rule)
        saved = project.save()
        out: dict[str, object] = {}
        for drop, q in last.items():
            project.restore(saved)
            out[f"drop {drop:.2f}"], out[f"calls {drop:.2f}"] = project.night(NIGHTS, q, "new-judge", rule)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=100)
    args = parser.parse_args()
    started = time.monotonic()
    print(f"judge change after {NIGHTS} nights, {CASES} judged cases, judge noise sd {SD}, new judge "
          f"{BIAS['new-judge']:+.2f}; {args.trials} trials per rule\n")
    print(f"{'rule':8} {'regressed, product unchanged':>32} {'regressed, product -30 %':>30} {'re-graded':>13}")
    for rule in RULES:
        records = [trial(1000 + t, rule) for t in range(args.trials)]
        cells = []
        for drop in (0.0, DROP):
            k = sum(1 for r in records if r[f"drop {drop:.2f}"] == "regressed")
            lo, hi = wilson(k, len(records))
            cells.append(f"{k / len(records):6.1%} [{lo:.1%}–{hi:.1%}]")
        calls = sum(int(r["calls 0.00"]) for r in records) / len(records)  # type: ignore[call-overload]
        print(f"{rule:8} {cells[0]:>32} {cells[1]:>30} {calls:>13.0f}")
    print(f"\n{time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
