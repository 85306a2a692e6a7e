"""Framework overhead: case-scores per second and peak memory for a trivial heuristic suite.

Runs the same trivial suite (echo target, `equals` scorer, history writes to SQLite) at
several sizes, each in a fresh subprocess, and prints throughput and peak RSS side by side,
so that "memory stays flat as the suite grows" is visible as a ratio. Throughput is given in
wall time and in the process's CPU time: on a shared machine the CPU figure is the steadier one.

    python bench/core_overhead.py            # 2,500 / 10,000 / 40,000 cases
    python bench/core_overhead.py 10000      # one size

Measured on the 2-core development machine, shared with other jobs, alternating with the
previous runner in one session (warm runs, 2 rounds at load ~1.5): 10k cases 33.1–33.6k
case-scores/s wall (36.0–36.6k per CPU second) against 17.9k before; 100k cases 32.8–36.5k wall
(35.0–38.7k per CPU second) against 18.0–18.2k before. At load 2.6–6 the wall figures fall to
18–28k while the CPU figures stay at 28–35k. Per case, about a third of the time is SQLite
writing the two history rows (case_results, case_scores); the rest is reading and checking the
case (parsed once when the file is at most 4 MB: the check keeps the parsed lines for the run;
twice above that, so memory stays flat), the run loop, the `equals` Score, and the comparison
with the baseline.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET = "def echo(input):\n    return input\n"


def make_project(root: Path, n: int) -> None:
    (root / "fixtures").mkdir(parents=True)
    (root / "sut.py").write_text(TARGET)
    with (root / "fixtures" / "cases.jsonl").open("w") as f:
        for i in range(n):
            f.write(json.dumps({"id": f"case-{i}", "input": f"text {i}", "expected": f"text {i}"}) + "\n")
    (root / "fixtures" / "trivial.yaml").write_text(
        "name: trivial\ntarget: sut:echo\nscorers:\n  - name: equals\n    params: {normalize: false}\n"
        "cases: cases.jsonl\n")


def child(root: str) -> None:
    from evalloop import load_settings, run_suite

    settings = load_settings(Path(root))
    started = time.perf_counter()
    run_suite("trivial", settings=settings)  # cold: creates the database; no baseline yet
    cold = time.perf_counter() - started
    started, cpu_started = time.perf_counter(), time.process_time()
    report = run_suite("trivial", settings=settings)  # warm: compared with the first run
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    n = report.executed.run.n_cases
    assert report.executed.summaries["equals"].mean == 1.0
    peaks = traced_peaks(settings)
    print(json.dumps({"n": n, "seconds": elapsed, "cpu": cpu, "cold": cold, "rss_mb": rss_mb, **peaks}))


def traced_peaks(settings) -> dict:
    """A second run under tracemalloc: peak Python memory of each step (MB)."""
    import asyncio
    import tracemalloc

    import evalloop.loop.pipeline as pipeline

    peaks: dict[str, float] = {}

    def traced(name, fn, is_async=False):
        async def run_async(*a, **k):
            tracemalloc.reset_peak()
            out = await fn(*a, **k)
            peaks[name] = tracemalloc.get_traced_memory()[1] / 1e6
            return out

        def run_sync(*a, **k):
            tracemalloc.reset_peak()
            out = fn(*a, **k)
            peaks[name] = tracemalloc.get_traced_memory()[1] / 1e6
            return out

        return run_async if is_async else run_sync

    pipeline.prepare = traced("prepare_mb", pipeline.prepare)
    pipeline.execute = traced("execute_mb", pipeline.execute, is_async=True)
    pipeline.compare_run = traced("compare_mb", pipeline.compare_run)
    tracemalloc.start()
    asyncio.run(pipeline.arun_suite("trivial", settings=settings))
    tracemalloc.stop()
    return peaks


def measure(n: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        make_project(root, n)
        out = subprocess.run([sys.executable, __file__, "--child", tmp], capture_output=True,
                             text=True, check=True, cwd=tmp)
        return json.loads(out.stdout.strip().splitlines()[-1])


def baseline_rss() -> float:
    out = subprocess.run([sys.executable, "-c", "import resource, evalloop.cli, evalloop.run.runner;"
                          "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)"],
                         capture_output=True, text=True, check=True)
    return float(out.stdout)


def main(sizes: list[int]) -> None:
    import_rss = baseline_rss()
    print(f"evalloop imported: {import_rss:.0f} MB peak RSS; times below exclude imports and "
          "include validation, the run, history writes and the baseline comparison (the second, warm run "
          "of each size; 'cold' is the first run, which also creates the database); "
          "'run/validate/compare MB' are tracemalloc peaks of each step (a second, traced run)")
    print(f"{'cases':>8} {'cold s':>7} {'seconds':>8} {'case-scores/s':>14} {'per CPU s':>10} {'peak RSS MB':>12}"
          f" {'above import':>13}"
          f" {'run MB':>7} {'validate MB':>12} {'compare MB':>11}")
    rows = []
    for n in sizes:
        r = measure(n)
        rows.append(r)
        print(f"{r['n']:>8} {r['cold']:>7.2f} {r['seconds']:>8.2f} {r['n'] / r['seconds']:>14,.0f}"
              f" {r['n'] / r['cpu']:>10,.0f} "
              f"{r['rss_mb']:>12.0f} {r['rss_mb'] - import_rss:>13.0f} {r['execute_mb']:>7.1f}"
              f" {r['prepare_mb']:>12.1f} {r['compare_mb']:>11.1f}")
    if len(rows) > 1:
        grow = rows[-1]["n"] / rows[0]["n"]
        mem = (rows[-1]["rss_mb"] - import_rss) / max(1.0, rows[0]["rss_mb"] - import_rss)
        run_mem = rows[-1]["execute_mb"] / max(0.1, rows[0]["execute_mb"])
        print(f"suite grew {grow:.0f}×; peak RSS above import grew {mem:.2f}×; the run's own peak "
              f"(streamed cases, batched writes) grew {run_mem:.2f}×; validation keeps the case ids and the "
              "comparison the per-case scores (O(n) floats). Target ≥ 30,000 case-scores/s.")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child(sys.argv[2])
    else:
        main([int(a) for a in sys.argv[1:]] or [2_500, 10_000, 40_000])
