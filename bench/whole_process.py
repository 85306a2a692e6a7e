"""Whole-process speed and memory: the ``evalloop run`` command timed from exec to exit.

A project with N trivial cases (echo target, one exact ``equals`` scorer, results persisted to
the SQLite history and the run log, as a user runs it) is run with the real console script, in
a fresh process each time. Beside it, in the same rounds (rotated, so the machine's load
falls on both alike), a fixed reference workload does the same job by hand: a plain Python
process that reads the JSONL cases, echoes each input, compares it with its expected value
and inserts one result row per case into SQLite with ``executemany``. The figures read as a
ratio to that reference, so they mean something on a noisy, shared machine.

Also timed: ``evalloop --help`` beside ``python -c pass`` (interpreter start-up).

    python bench/whole_process.py                 # 10,000 and 100,000 cases, 3 rounds
    python bench/whole_process.py 2000 --rounds 2 # quick
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from core_overhead import make_project  # the same trivial project (bench/ is on sys.path)

REFERENCE = r"""
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[2])
db.execute("create table if not exists r (run int, case_id text, output text, value real)")
run = db.execute("select count(distinct run) from r").fetchone()[0]
rows = []
with open(sys.argv[1], encoding="utf-8") as f:
    for line in f:
        case = json.loads(line)
        output = case["input"]
        rows.append((run, case["id"], json.dumps(output), float(output == case["expected"])))
        if len(rows) >= 1000:
            db.executemany("insert into r values (?, ?, ?, ?)", rows); rows = []
db.executemany("insert into r values (?, ?, ?, ?)", rows)
db.commit()
"""


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, float]:
    """Wall seconds, peak RSS (MB) and CPU seconds of one child process, from exec to exit."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode() if proc.stderr else ""
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}: {err.strip()[-500:]}")
    return elapsed, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime


def checkout(ref: str, into: Path) -> Path:
    """A checkout to compare with: ``ref`` itself when it is a folder, else the commit ``ref`` of
    this repository, extracted (``git archive``) into ``into``."""
    if Path(ref).is_dir():
        return Path(ref)
    into.mkdir(parents=True, exist_ok=True)
    repo = Path(__file__).resolve().parents[1]
    archive = subprocess.run(["git", "-C", str(repo), "archive", ref], capture_output=True, check=False)
    if archive.returncode != 0:
        raise SystemExit(f"--previous {ref}: neither a folder nor a commit ({archive.stderr.decode().strip()})")
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def evalloop_cmd() -> list[str]:
    script = shutil.which("evalloop", path=str(Path(sys.executable).parent))
    return [script] if script else [sys.executable, "-c", "from evalloop.cli import main; main()"]


Job = tuple[list[str], dict[str, str], Path]


def workloads(root: Path, n: int, env: dict[str, str], previous: Path | None) -> dict[str, Job]:
    """name → (argv, env, project folder) of each process timed side by side."""
    run = [*evalloop_cmd(), "run", "--suite", "trivial"]
    make_project(root / "current", n)
    found = {"evalloop": (run, env, root / "current"),
             "reference": ([sys.executable, "-c", REFERENCE, str(root / "current" / "fixtures" / "cases.jsonl"),
                            str(root / "ref.db")], env, root)}
    if previous is not None:  # the previous release's source, on a project (and history) of its own
        make_project(root / "previous", n)
        found["previous"] = (run, {**env, "PYTHONPATH": str(previous / "src")}, root / "previous")
    return found


def measure(n: int, rounds: int, env: dict[str, str], previous: Path | None) -> dict[str, dict[str, float]]:
    """Each workload once cold (creating its database), then ``rounds`` warm runs, rotated."""
    with tempfile.TemporaryDirectory() as tmp:
        jobs = workloads(Path(tmp), n, env, previous)
        out: dict[str, dict[str, float]] = {}
        samples: dict[str, list[tuple[float, float, float]]] = {name: [] for name in jobs}
        for name, (argv, job_env, cwd) in jobs.items():
            out[name] = {"cold": timed(argv, cwd, job_env)[0]}
        names = list(jobs)
        for i in range(rounds):  # rotated: each round starts with another workload
            for name in names[i % len(names):] + names[:i % len(names)]:
                argv, job_env, cwd = jobs[name]
                samples[name].append(timed(argv, cwd, job_env))
        for name, got in samples.items():
            out[name].update(seconds=statistics.median(t for t, _, _ in got), rss=max(r for _, r, _ in got),
                             cpu=statistics.median(c for _, _, c in got))
    return out


def startup(rounds: int, env: dict[str, str], previous: Path | None) -> dict[str, tuple[float, float]]:
    """`evalloop --help` beside `python -c pass` (and the previous release's), alternated; medians of
    (wall, CPU) seconds, the first, cache-warming round dropped."""
    here = Path.cwd()
    jobs = {"evalloop --help": ([*evalloop_cmd(), "--help"], env),
            "python -c pass": ([sys.executable, "-c", "pass"], env)}
    if previous is not None:
        jobs["previous --help"] = ([*evalloop_cmd(), "--help"], {**env, "PYTHONPATH": str(previous / "src")})
    got: dict[str, list[tuple[float, float, float]]] = {name: [] for name in jobs}
    for i in range(rounds + 1):
        for name, (argv, job_env) in jobs.items():
            sample = timed(argv, here, job_env)
            if i:
                got[name].append(sample)
    return {name: (statistics.median(t for t, _, _ in s), statistics.median(c for _, _, c in s))
            for name, s in got.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sizes", nargs="*", type=int, default=[10_000, 100_000])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--previous", default=None,
                        help="a checkout or a commit of the previous release (its src/ is put first on "
                             "PYTHONPATH)")
    args = parser.parse_args()
    if args.previous is not None:
        args.previous = checkout(args.previous, Path(tempfile.mkdtemp(prefix="evalloop-previous-")))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_", "EVALLOOP_"))}
    env["EVALLOOP_CODE_VERSION"] = "bench"  # no git calls: the project is a temp dir
    # as an installed package runs: compiled bytecode is cached after the first start (a shell
    # with PYTHONDONTWRITEBYTECODE=1 would recompile every module of every process)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    starts = startup(args.rounds * 2, env, args.previous)
    bare_wall, bare_cpu = starts["python -c pass"]
    for name, (wall, cpu) in starts.items():
        print(f"{name:<16} {wall:5.2f} s (CPU {cpu:4.2f} s) = {wall / bare_wall:5.1f}× python -c pass"
              f" (CPU {cpu / bare_cpu:5.1f}×)")
    print("target: evalloop --help ≤ 0.30 s")
    print(f"\nwhole `evalloop run` process, warm (median of {args.rounds}; RSS the largest), beside the "
          "hand-written reference loop (JSONL → echo → compare → SQLite) in the same rotated rounds")
    print(f"{'cases':>8} {'workload':<10} {'cold s':>7} {'warm s':>7} {'CPU s':>6} {'× ref':>6} {'CPU × ref':>9}"
          f" {'cases/s':>9} {'RSS MB':>7}")
    rows = []
    for n in args.sizes:
        r = measure(n, args.rounds, env, args.previous)
        rows.append((n, r))
        ref = r["reference"]
        for name, m in r.items():
            print(f"{n:>8} {name:<10} {m['cold']:>7.2f} {m['seconds']:>7.2f} {m['cpu']:>6.2f}"
                  f" {m['seconds'] / ref['seconds']:>5.1f}× {m['cpu'] / ref['cpu']:>8.1f}×"
                  f" {n / m['seconds']:>9,.0f} {m['rss']:>7.0f}")
    if len(rows) > 1:
        (n0, first), (n1, last) = rows[0], rows[-1]
        for name in first:
            print(f"{name}: {n1 // n0}× the cases → {last[name]['seconds'] / first[name]['seconds']:.1f}× the time, "
                  f"RSS {last[name]['rss'] / first[name]['rss']:.2f}×")
        print("targets: 10k ≤ 1.0 s, 100k ≤ 5 s, RSS at 100k ≤ 1.3× RSS at 10k")


if __name__ == "__main__":
    main()
