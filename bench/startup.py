"""Start-up of the commands people type most, whole process, warm, beside the previous release.

Three commands, each a fresh process timed from exec to exit (``bench/whole_process.py``'s
``timed``), warm (a first, untimed round compiles bytecode and creates the databases), in rotated
rounds so the machine's load falls on every workload alike, and with ``--previous DIR`` the same
command of another checkout (its ``src/`` first on ``PYTHONPATH``, on a project of its own):

- ``evalloop run --suite similarity``: the shipped 38-case suite (the static embedder, SQLite
  history, run log, comparison with the runs before); also the time the run itself printed;
- ``evalloop run --suite trivial`` on 10,000 JSONL cases (echo target, ``equals``), as
  ``bench/whole_process.py`` builds it;
- ``evalloop --help``, beside ``python -c pass``.

    python bench/startup.py --previous 4e61118             # 5 rounds; a commit or a folder
    python bench/startup.py --previous /tmp/evbase --rounds 3 --no-10k
    python bench/startup.py --previous /tmp/evbase --history 30   # after a month of nightly runs

Targets (issue #25): similarity ≤ 0.7 s; 10k ≤ 1.1× the previous release; --help ≤ 0.3 s.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from core_overhead import make_project  # bench/ is on sys.path
from whole_process import checkout, evalloop_cmd

Job = tuple[list[str], dict[str, str], Path]
PRINTED = re.compile(r" in (\d+(?:\.\d+)?)s")


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, float | None]:
    """Wall seconds, CPU seconds, and the seconds the command printed (``… in 0.4s``), if any."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - started
    err = proc.stderr.read().decode() if proc.stderr else ""
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):  # 1: a verdict (the trivial suite never fails; similarity may watch)
        raise SystemExit(f"{' '.join(argv)} exited {code}: {err.strip()[-500:]}")
    found = PRINTED.findall(err)
    return elapsed, usage.ru_utime + usage.ru_stime, float(found[-1]) if found else None


def jobs(root: Path, env: dict[str, str], previous: Path | None, big: int) -> dict[str, Job]:
    """name → (argv, env, folder) of every process timed side by side."""
    cmd = evalloop_cmd()
    sides = {"current": env}
    if previous is not None:
        sides["previous"] = {**env, "PYTHONPATH": str(previous / "src")}
    out: dict[str, Job] = {"python -c pass": ([sys.executable, "-c", "pass"], env, root)}
    for side, side_env in sides.items():
        (root / side / "similarity").mkdir(parents=True)
        out[f"{side} --help"] = ([*cmd, "--help"], side_env, root)
        out[f"{side} similarity"] = ([*cmd, "run", "--suite", "similarity"], side_env, root / side / "similarity")
        if big:
            make_project(root / side / "trivial", big)
            out[f"{side} {big // 1000}k"] = ([*cmd, "run", "--suite", "trivial"], side_env, root / side / "trivial")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--previous", default=None,
                        help="a checkout or a commit of the previous release (its src/ is put first on "
                             "PYTHONPATH), e.g. 4e61118")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cases", type=int, default=10_000, help="cases of the trivial suite")
    parser.add_argument("--no-10k", dest="big", action="store_false", help="leave the trivial suite out")
    parser.add_argument("--history", type=int, default=1,
                        help="untimed runs of each command first (1: a fresh project; 30: a month of "
                             "nightly runs, whose history every run reads)")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_", "EVALLOOP_"))}
    env["EVALLOOP_CODE_VERSION"] = "bench"  # no git calls: the projects are temp dirs
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as an installed package runs: bytecode cached
    env["NO_COLOR"] = "1"
    with tempfile.TemporaryDirectory() as tmp:
        previous = None if args.previous is None else checkout(args.previous, Path(tmp) / "previous-src")
        work = jobs(Path(tmp), env, previous, args.cases if args.big else 0)
        for argv, job_env, cwd in work.values():  # warm-up: bytecode, databases, a first baseline
            for _ in range(max(1, args.history)):
                timed(argv, cwd, job_env)
        samples: dict[str, list[tuple[float, float, float | None]]] = {name: [] for name in work}
        names = list(work)
        for i in range(args.rounds):
            for name in names[i % len(names):] + names[:i % len(names)]:
                argv, job_env, cwd = work[name]
                samples[name].append(timed(argv, cwd, job_env))
    print(f"whole process, warm: median of {args.rounds} rotated rounds after {max(1, args.history)} untimed "
          f"run(s) of each (load {os.getloadavg()[0]:.1f}, {os.cpu_count()} CPUs)")
    print(f"{'command':<22} {'wall s':>7} {'CPU s':>6} {'printed s':>9} {'wall × prev':>11} {'CPU × prev':>10} "
          f"{'paired':>7}")
    wall = {name: statistics.median(t for t, _, _ in got) for name, got in samples.items()}
    cpu = {name: statistics.median(c for _, c, _ in got) for name, got in samples.items()}
    spreads: list[str] = []
    for name, got in samples.items():
        printed = [p for _, _, p in got if p is not None]
        other = name.replace("current", "previous")
        ratios = ""
        if name.startswith("current") and other in wall:
            # each round's own ratio (both sides ran in the same round, seconds apart): the
            # machine's drift from round to round cancels out of it
            paired = [t / samples[other][i][0] for i, (t, _, _) in enumerate(got)]
            ratios = (f"{wall[name] / wall[other]:>10.2f}× {cpu[name] / cpu[other]:>9.2f}× "
                      f"{statistics.median(paired):>6.2f}×")
            spreads.append(f"{name.removeprefix('current ')} {min(paired):.2f}–{max(paired):.2f}×")
        print(f"{name:<22} {wall[name]:>7.2f} {cpu[name]:>6.2f} "
              f"{statistics.median(printed) if printed else float('nan'):>9.2f} {ratios}")
    if spreads:
        print("paired: the median of each round's wall ratio; its range over the rounds: " + ", ".join(spreads))
    print("(on a loaded machine the wall time is mostly waiting for a CPU: read the CPU column, and its ratio)")
    print(f"targets: similarity ≤ 0.70 s, {args.cases // 1000}k ≤ 1.10× previous, --help ≤ 0.30 s")


if __name__ == "__main__":
    main()
