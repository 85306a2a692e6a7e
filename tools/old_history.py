"""Make a small history database with an older evalloop's own code, for the migration tests.

    PYTHONPATH=<old checkout>/src python tools/old_history.py OUT_DIR

(e.g. ``git worktree add /tmp/old f3594c2``). It builds a throwaway project, runs a suite four
times (the fourth run regresses, so a failure memory is written into the memory store), adds a
schedule and a ledger entry, and copies ``evalloop.db`` and ``memory.db`` to OUT_DIR. The
databases under ``tests/data/`` were made this way; CI never runs old code.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

TARGET = """
import json, os

def controlled(input):
    with open(os.environ["EVALLOOP_TEST_ANSWERS"]) as f:
        return json.load(f).get(input["id"], 0.0)
"""
SCORER = """
from evalloop import Score, scorer

@scorer("value", kind="llm_operation")
def value(input, output, expected):
    return Score(value=float(output))
"""
SUITE = "name: controlled\ntarget: sut:controlled\nscorers: [value, equals]\ncases:\n" + "".join(
    f"- {{id: c{i}, input: {{id: c{i}}}, expected: 1.0}}\n" for i in range(6))


def main(out: Path) -> None:
    root = Path(tempfile.mkdtemp())
    (root / "fixtures").mkdir()
    (root / "scorers").mkdir()
    (root / "sut.py").write_text(textwrap.dedent(TARGET))
    (root / "scorers" / "project_scorers.py").write_text(textwrap.dedent(SCORER))
    (root / "fixtures" / "controlled.yaml").write_text(SUITE)
    answers = root / "answers.json"
    env = {**os.environ, "EVALLOOP_TEST_ANSWERS": str(answers), "NO_COLOR": "1"}

    def evalloop(*args: str) -> None:
        proc = subprocess.run([sys.executable, "-m", "evalloop", *args, "-C", str(root)], env=env,
                              capture_output=True, text=True)
        print(" ".join(args), "->", proc.returncode, proc.stdout.strip().splitlines()[-1:] or proc.stderr[-300:])

    for good in (True, True, True, False):
        answers.write_text(json.dumps({f"c{i}": 1.0 if good or i > 2 else 0.0 for i in range(6)}))
        evalloop("run", "--suite", "controlled")
    evalloop("schedule", "add", "--suite", "controlled", "--cron", "0 3 * * *", "--tz", "UTC", "--id", "nightly")
    from evalloop.scheduling import ledger  # the old checkout's ledger: one fire's entry

    url = f"sqlite:///{root / 'history' / 'evalloop.db'}"
    entry = ledger.start(url, job_id="nightly", fire_id="2026-01-01T03:00:00+00:00", suite="controlled",
                         owner="host:1:abc")
    ledger.finish(url, entry, status="ran", verdict="pass")
    out.mkdir(parents=True, exist_ok=True)
    for name in ("evalloop.db", "memory.db"):
        db = root / "history" / name
        subprocess.run(["sqlite3", str(db), "PRAGMA wal_checkpoint(TRUNCATE); VACUUM;"], check=False)
        shutil.copy(db, out / name)
    shutil.rmtree(root)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
