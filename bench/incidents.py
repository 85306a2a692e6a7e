"""Incidents over simulated weeks, through real runs: how soon a fixed regression resolves, how far
an incident grows on an unchanged suite, and how often a regression that stays is resolved anyway.

Every figure comes from real runs — ``run_suite(..., nightly=True)`` (what scheduled fires run)
on a real suite file, a target answering the scores this simulation drew (and reading its lessons,
which change nothing, in two scenarios), a project ``llm_judge`` scorer, a real SQLite history and the real embedded
memory store with learning on — so the verdict, the incident state machine and the ablations are
the shipped ones. The judge suite of issue #36: 50 cases, quality q ~ Beta(6, 2), a night's grade
clip(q·(1 − drop) + N(0, 0.2), 0, 1), pass mark 0.5, floor off (``min_score: 0``: only the drop
rules open incidents). Each trial is a new suite and history: 5 nights fill the baseline window, then

* ``fixed``: 3 nights of a 15 % drop, then the product is fixed: the good nights until the
  incident resolves (of the trials where one opened), at most 6; ``fixed-lessons``: the same
  with a target that reads its lessons, so every run has the lesson and only the ablations
  (every run) can resolve it;
* ``stays``: the 15 % drop never goes: the share of incidents resolved within 10 nights anyway;
* ``held, no ablation``: 1 night of a 30 % drop opens an incident, then 23 unchanged nights with
  ``ablation_every: 0`` — the lesson is injected on every run and never checked, so the incident
  stays held: its remembered cases at opening and after the 23 nights (the join rule's bound).

Usage: ``python bench/incidents.py [--trials 100] [--jobs 2] [--scenarios fixed,fixed-lessons,stays,held]``.
Seeds are fixed: a rerun gives the same table. Wilson 95 % intervals beside each share.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from intervals import wilson  # bench/ is the script's folder

HERE = Path(__file__).resolve().parent
N, WARM, SD = 50, 5, 0.2
TARGET = '''
import json

def answers(input, path):
    """The grade the simulation drew for this case tonight."""
    with open(path) as f:
        return json.load(f)[input["id"]]

def reader(input, path, lessons=""):
    """The same, for a target that reads its lessons (they change nothing)."""
    return answers(input, path)
'''
SCORERS = '''
from evalloop import Score, scorer

@scorer("judge", kind="llm_judge")
def judge(input, output, expected):
    """A judge's grade in [0, 1]; llm_judge threshold 20 %."""
    return Score(value=float(output))
'''


def worker(spec: dict) -> Iterator[dict]:
    """Trials of one scenario; one JSON-able record per trial."""
    import numpy as np

    rng = np.random.default_rng(spec["seed"])
    for _ in range(spec["trials"]):
        yield trial(spec["scenario"], rng)


def trial(scenario: str, rng: Any) -> dict:
    """One new suite and history through the scenario's nights."""
    import shutil

    import numpy as np
    import yaml

    from evalloop import RunOptions, load_settings, run_suite
    from evalloop.learning import incidents as learning
    from evalloop.memory.store import MemoryStore
    from evalloop.run.services import build_services
    from evalloop.scoring.registry import discover

    root = Path(tempfile.mkdtemp(prefix="incidents-"))
    (root / "fixtures").mkdir()
    (root / "scorers").mkdir()
    (root / "sut.py").write_text(textwrap.dedent(TARGET))
    (root / "scorers" / "lab_scorers.py").write_text(textwrap.dedent(SCORERS))
    (root / "evalloop.toml").write_text("run_log = false\n")
    answers = root / "answers.json"
    ref = "sut:reader" if scenario in ("fixed-lessons", "held") else "sut:answers"
    suite = {"name": "lab", "target": {"ref": ref, "params": {"path": str(answers)}},
             "scorers": [{"name": "judge", "min_score": 0}], "holdout": 0,
             "ablation_every": 0 if scenario == "held" else 1,
             "cases": [{"id": f"c{i:02d}", "input": {"id": f"c{i:02d}"}} for i in range(N)]}
    (root / "fixtures" / "lab.yaml").write_text(yaml.safe_dump(suite, sort_keys=False))
    settings = load_settings(root)
    registry = discover(root)
    services, _ = build_services(settings, engine="local")
    q = rng.beta(6, 2, size=N)

    def night(drop: float) -> list[str]:
        """One night; what the learning steps did (the ablation's included)."""
        grades = np.clip(q * (1 - drop) + rng.normal(0, SD, N), 0, 1)
        answers.write_text(json.dumps({f"c{i:02d}": float(v) for i, v in enumerate(grades)}))
        report = run_suite("lab", RunOptions(nightly=True), settings=settings, registry=registry, services=services)
        moved = [*(report.extras.get("memories") or []), *((report.extras.get("ablation") or {}).get("memories") or [])]
        return [m["action"] for m in moved]

    def remembered() -> list[int]:
        with MemoryStore(settings.memory_file) as store:
            found = learning.incidents(store, "lab", status=learning.ACTIVE)
        return [len(r.metadata.get("failing_cases") or []) for r in found]

    for _ in range(WARM):
        night(0.0)
    record: dict = {"opened": None, "resolved": None}
    if scenario in ("fixed", "fixed-lessons", "stays"):
        for i in range(3):
            if "opened" in night(0.15) and record["opened"] is None:
                record["opened"] = i + 1
        fixed = scenario != "stays"
        for i in range(6 if fixed else 10):
            if "resolved" in night(0.0 if fixed else 0.15):
                record["resolved"] = i + 1
                break
    else:
        record["opened"] = 1 if "opened" in night(0.30) else None
        record["at_open"] = remembered()
        record["states"] = [night(0.0) for _ in range(23)]
        record["after"] = remembered()
    shutil.rmtree(root, ignore_errors=True)
    return record



def share(k: int, n: int) -> str:
    lo, hi = wilson(k, n)
    return f"{k}/{n} = {k / n:.1%} [{lo:.0%}–{hi:.0%}]" if n else "—"


def launch(spec: dict) -> list[dict]:
    env = {**os.environ, "PYTHONPATH": str(HERE.parent / "src")}
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--worker", json.dumps(spec)],
                          env=env, capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"worker {spec} failed:\n{proc.stderr[-3000:]}")
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--scenarios", default="fixed,fixed-lessons,stays,held")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        for record in worker(json.loads(args.worker)):
            print(json.dumps(record), flush=True)
        return
    jobs = []
    for si, name in enumerate(args.scenarios.split(",")):
        chunks = max(1, min(args.jobs, args.trials // 10 or 1))
        for c in range(chunks):
            trials = args.trials // chunks + (1 if c < args.trials % chunks else 0)
            jobs.append((name, {"scenario": name, "trials": trials, "seed": 1000 * si + c}))
    started = time.perf_counter()
    with ThreadPoolExecutor(args.jobs) as pool:
        done = list(pool.map(lambda j: (j[0], launch(j[1])), jobs))
    results: dict[str, list[dict]] = {}
    for name, records in done:
        results.setdefault(name, []).extend(records)
    print(f"incidents: {args.trials} trials per scenario, 50-case judge suite, nightly runs; "
          f"{time.perf_counter() - started:.0f} s, load {os.getloadavg()[0]:.1f}\n")
    for name, records in results.items():
        opened = [r for r in records if r["opened"] is not None]
        print(f"## {name}: an incident opened in {share(len(opened), len(records))}")
        if name.startswith("fixed"):
            for k in (1, 2, 3, 6):
                print(f"  resolved within {k} good night(s): "
                      f"{share(sum(r['resolved'] is not None and r['resolved'] <= k for r in opened), len(opened))}")
        elif name == "stays":
            for k in (3, 10):
                print(f"  resolved within {k} nights though the drop stays: "
                      f"{share(sum(r['resolved'] is not None and r['resolved'] <= k for r in opened), len(opened))}")
        else:
            at = [sum(r["at_open"]) for r in opened]
            after = [sum(r["after"]) for r in opened]
            grew = sorted(b - a for a, b in zip(at, after, strict=True))
            if grew:
                print(f"  remembered cases at opening: mean {sum(at) / len(at):.1f}; after 23 unchanged nights: "
                      f"mean {sum(after) / len(after):.1f}, max {max(after)}")
                print(f"  cases joined in 23 nights: mean {sum(grew) / len(grew):.2f}, "
                      f"95th percentile {grew[int(0.95 * (len(grew) - 1))]}, max {grew[-1]}")
        print()


if __name__ == "__main__":
    main()
