"""Peak memory of one large case: `evalloop run` on a suite with one case of N MB, beside a
reference process that only reads the same JSONL line and parses it (same run, same machine).

    python bench/case_memory.py [--mb 22] [--cases 1] [--format yaml|jsonl]

Prints the peak RSS of both (fresh processes, `ru_maxrss` of the child), the difference
over the interpreter's own baseline, and that difference as a multiple of the case size.
Target: the run costs at most a few times the case (the issue: 854 MB for a 22 MB case).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import textwrap
import time
from pathlib import Path

EMPTY = "import sys\n"
REFERENCE = textwrap.dedent('''
    import json, sys
    import yaml
    with open(sys.argv[1], "rb") as f:
        if sys.argv[2] == "yaml":  # what a suite loader must at least do: parse the file once
            cases = yaml.load(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))["cases"]
        else:
            cases = [json.loads(line) for line in f]
    print(len(cases))
''')


def peak_mb(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, int]:
    """Peak RSS (MB) and wall time of a fresh child process, and its exit code."""
    started = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # the child measures only itself: exec replaces it, ru_maxrss is its own
        os.chdir(cwd)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        os.execve(argv[0], argv, env)
    _, status, usage = os.wait4(pid, 0)
    return usage.ru_maxrss / 1024.0, time.perf_counter() - started, os.waitstatus_to_exitcode(status)


def make_project(root: Path, mb: float, cases: int, fmt: str) -> Path:
    (root / "fixtures").mkdir(parents=True)
    (root / "sut.py").write_text("def echo(input):\n    return input\n")
    text = ("lorem ipsum dolor sit amet " * (int(mb * 1024 * 1024) // 27 + 1))[: int(mb * 1024 * 1024)]
    with (root / "fixtures" / "cases.jsonl").open("w", encoding="utf-8") as f:
        for i in range(cases):
            f.write(json.dumps({"id": f"big-{i}", "input": {"text": text}, "expected": {"text": text}}) + "\n")
    if fmt == "yaml":  # the cases inline in the suite file (JSON is valid YAML)
        lines = (root / "fixtures" / "cases.jsonl").read_text(encoding="utf-8").splitlines()
        (root / "fixtures" / "cases.jsonl").unlink()
        (root / "fixtures" / "big.yaml").write_text(
            "name: big\ntarget: sut:echo\nscorers: [equals]\ncases:\n" + "".join(f"  - {line}\n" for line in lines))
    else:
        (root / "fixtures" / "big.yaml").write_text(
            "name: big\ntarget: sut:echo\nscorers: [equals]\ncases: cases.jsonl\n")
    return root


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=22.0, help="size of the case's input text, MB")
    parser.add_argument("--cases", type=int, default=1, help="how many such cases")
    parser.add_argument("--format", choices=["jsonl", "yaml"], default="yaml",
                        help="cases in a JSONL file beside the suite, or inline in the YAML suite")
    args = parser.parse_args()
    evalloop = str(Path(sys.executable).parent / "evalloop")
    env = {**os.environ, "NO_COLOR": "1", "EVALLOOP_LEARN": "false"}
    with tempfile.TemporaryDirectory() as tmp:
        root = make_project(Path(tmp), args.mb, args.cases, args.format)
        data = root / "fixtures" / ("big.yaml" if args.format == "yaml" else "cases.jsonl")
        size_mb = data.stat().st_size / 1024 / 1024
        (root / "empty.py").write_text(EMPTY)
        (root / "reference.py").write_text(REFERENCE)
        bare, _, _ = peak_mb([sys.executable, "-c", "import evalloop.cli"], root, env)
        ref, ref_s, _ = peak_mb([sys.executable, "reference.py", str(data), args.format], root, env)
        interp, _, _ = peak_mb([sys.executable, "empty.py"], root, env)
        run, run_s, code = peak_mb([evalloop, "run", "--suite", "big", "--no-fail-on-regression"], root, env)
        log = root / "history" / "big.jsonl"
        log_mb = log.stat().st_size / 1024 / 1024 if log.exists() else 0.0
    over = run - bare
    print(f"case file: {size_mb:.1f} MB {args.format} ({args.cases} case(s) of {args.mb:g} MB input "
          "+ the same expected)")
    print(f"reference (read + parse the file once): peak {ref:.0f} MB, {ref - interp:.0f} MB over a bare "
          f"interpreter ({interp:.0f} MB), {ref_s:.2f} s")
    print(f"evalloop run: peak {run:.0f} MB, {over:.0f} MB over `import evalloop.cli` ({bare:.0f} MB), "
          f"{run_s:.2f} s, exit {code}")
    print(f"ratio: run costs {over / size_mb:.1f}x the case file; the reference {(ref - interp) / size_mb:.1f}x; "
          f"run / reference {over / max(ref - interp, 1e-9):.1f}x; run log {log_mb:.2f} MB")


if __name__ == "__main__":
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    main()
