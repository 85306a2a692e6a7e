"""Blocking sync targets, whole process: adaptive placement beside threads for every call.

Two workloads, each ``evalloop run`` as a fresh process (exec to exit), warm, with the project's
default settings (``concurrency = 16``, no flag), in rotated rounds:

- ``blocking``: 48 cases of a sync target that blocks 0.2 s (``time.sleep``, as an SDK call
  does); ideal at 16 in flight: 3 × 0.2 s plus the process;
- ``trivial``: 10,000 JSONL cases of an echo target (``bench/whole_process.py``'s project), where
  a thread per call would only add its hand-off.

Each runs with the suite as written (adaptive: ``target_threads`` unset) and with
``target_threads: true`` (every call on a thread), and with ``--previous REF`` (a folder or a
commit, e.g. ``4e61118``) the previous checkout's default as well. Medians and each round's own
ratio to the adaptive run (``paired``).

    python bench/blocking_target.py --previous 4e61118 --rounds 5
    python bench/blocking_target.py --rounds 3 --no-trivial

Targets (issue #39): blocking ≤ 2.0 s whole process by default; trivial no slower than before.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from pathlib import Path

from core_overhead import make_project  # bench/ is on sys.path
from startup import timed
from whole_process import checkout, evalloop_cmd

BLOCKING = """
import time

def block(input):
    time.sleep(input["sleep"])
    return input["value"]
"""


def blocking_project(root: Path, cases: int, sleep: float, threads: bool) -> None:
    (root / "fixtures").mkdir(parents=True)
    (root / "sut.py").write_text(BLOCKING)
    lines = [f"  - {{id: c{i}, input: {{sleep: {sleep}, value: {i}}}, expected: {i}}}" for i in range(cases)]
    (root / "fixtures" / "blocking.yaml").write_text(
        "name: blocking\ntarget: sut:block\nscorers: [equals]\n"
        + ("target_threads: true\n" if threads else "") + "cases:\n" + "\n".join(lines) + "\n")


def trivial_project(root: Path, cases: int, threads: bool) -> None:
    make_project(root, cases)
    if threads:
        suite = root / "fixtures" / "trivial.yaml"
        suite.write_text(suite.read_text() + "target_threads: true\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--previous", default=None, help="a folder or a commit to compare with (e.g. 4e61118)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cases", type=int, default=48)
    parser.add_argument("--sleep", type=float, default=0.2)
    parser.add_argument("--no-trivial", dest="trivial", action="store_false")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_", "EVALLOOP_"))}
    env.update(EVALLOOP_CODE_VERSION="bench", NO_COLOR="1")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    cmd = evalloop_cmd()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        sides = {"adaptive": (env, False), "threads": (env, True)}
        if args.previous is not None:
            previous = checkout(args.previous, root / "previous-src")
            sides["previous"] = ({**env, "PYTHONPATH": str(previous / "src")}, False)
        work: dict[str, tuple[list[str], dict[str, str], Path]] = {}
        for side, (side_env, threads) in sides.items():
            blocking_project(root / side / "blocking", args.cases, args.sleep, threads)
            work[f"blocking {side}"] = ([*cmd, "run", "--suite", "blocking"], side_env, root / side / "blocking")
            if args.trivial:
                trivial_project(root / side / "trivial", 10_000, threads)
                work[f"trivial {side}"] = ([*cmd, "run", "--suite", "trivial"], side_env, root / side / "trivial")
        for argv, job_env, cwd in work.values():  # warm: bytecode, the database, a first baseline
            timed(argv, cwd, job_env)
        samples: dict[str, list[tuple[float, float, float | None]]] = {name: [] for name in work}
        names = list(work)
        for i in range(args.rounds):
            for name in names[i % len(names):] + names[:i % len(names)]:
                argv, job_env, cwd = work[name]
                samples[name].append(timed(argv, cwd, job_env))
    ideal = -(-args.cases // 16) * args.sleep
    print(f"whole process, warm, default settings (concurrency 16): median of {args.rounds} rotated rounds "
          f"(load {os.getloadavg()[0]:.1f}, {os.cpu_count()} CPUs)")
    print(f"blocking: {args.cases} cases × {args.sleep:g} s; the calls alone take {ideal:.1f} s at 16 in flight, "
          f"{args.cases * args.sleep:.1f} s one at a time")
    print(f"{'run':<20} {'wall s':>7} {'CPU s':>6} {'× adaptive':>10} {'paired':>7} {'range':>12}")
    for name, got in samples.items():
        workload = name.split()[0]
        base = samples[f"{workload} adaptive"]
        paired = [t / base[i][0] for i, (t, _, _) in enumerate(got)]
        wall = statistics.median(t for t, _, _ in got)
        cpu = statistics.median(c for _, c, _ in got)
        ratio = wall / statistics.median(t for t, _, _ in base)
        print(f"{name:<20} {wall:>7.2f} {cpu:>6.2f} {ratio:>9.2f}× {statistics.median(paired):>6.2f}× "
              f"{min(paired):>5.2f}–{max(paired):.2f}×")
    print("targets: blocking adaptive ≤ 2.0 s; trivial adaptive within 1.1× of the previous checkout "
          "(bench/startup.py measures that one on its own)")


if __name__ == "__main__":
    main()
