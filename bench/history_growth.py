"""What a run reads from its history, as the history grows: the baseline and the slow-drift
reference of one scorer, for the newest run of a suite with 10 / 100 / 1,000 completed runs.

Each history is written once (synthetic runs: completed, eligible, one acceptance early on),
then each side reads it in a fresh process: this checkout, and with ``--previous DIR`` another
checkout (its ``src/`` first on ``PYTHONPATH``), so the figures stand side by side.

    python bench/history_growth.py --previous /tmp/evhead
    python bench/history_growth.py --sizes 10 100 1000 3000

A run's comparison should cost the same after a year of nightly runs as after a week.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

WRITE = """
import json, sys
from datetime import timedelta
from evalloop.history.models import Run, RunStatus, ScorerSummary, utcnow
from evalloop.history.store import HistoryStore
store, n = HistoryStore(sys.argv[1]), int(sys.argv[2])
t0 = utcnow() - timedelta(days=n + 1)
for i in range(n):
    run = store.begin_run(Run(id=f"r{i:05d}", suite="s", started_at=t0 + timedelta(days=i)))
    details = json.dumps({"accepted": {"reason": "first normal"}} if i == 1 else {})
    summaries = [ScorerSummary(run_id=run.id, scorer=name, kind="heuristic", mean=0.9, n=40,
                               verdict="steady", eligible=True, details=details) for name in ("a", "b")]
    store.finish_run(run.id, summaries, status=RunStatus.COMPLETED, ended_at=run.started_at + timedelta(hours=1))
"""

READ = """
import json, sys, time
from evalloop.history.store import HistoryStore
store = HistoryStore(sys.argv[1])
newest = store.runs("s", limit=1)[0]
times = []
for _ in range(int(sys.argv[2])):
    started = time.perf_counter()
    for scorer in ("a", "b"):
        store.baseline_runs("s", scorer, newest, 5)
        store.reference_runs("s", scorer, newest, 5)
    times.append(time.perf_counter() - started)
print(json.dumps(times))
"""


def read_ms(url: str, env: dict[str, str], rounds: int) -> float:
    out = subprocess.run([sys.executable, "-c", READ, url, str(rounds)], env=env, capture_output=True,
                         text=True, check=True).stdout
    return statistics.median(json.loads(out)) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--previous", type=Path, default=None, help="a checkout to compare with")
    parser.add_argument("--sizes", type=int, nargs="*", default=[10, 100, 1000])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    env = {**os.environ}
    sides = {"current": env}
    if args.previous is not None:
        sides["previous"] = {**env, "PYTHONPATH": str(args.previous / "src")}
    print(f"reads of one comparison (2 scorers: baseline + drift reference), median of {args.rounds}, ms")
    print(f"{'runs':>6} " + " ".join(f"{side:>10}" for side in sides) + ("   ratio" if len(sides) > 1 else ""))
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.sizes:
            url = f"sqlite:///{tmp}/h{n}.db"
            subprocess.run([sys.executable, "-c", WRITE, url, str(n)], env=env, check=True)
            got = {side: read_ms(url, side_env, args.rounds) for side, side_env in sides.items()}
            ratio = f"  {got['previous'] / got['current']:5.1f}×" if "previous" in got else ""
            print(f"{n:>6} " + " ".join(f"{ms:>10.1f}" for ms in got.values()) + ratio)


if __name__ == "__main__":
    main()
