"""Opening a shared PostgreSQL history in a fresh process: the schema check, before and now.

Each evalloop process opens the history once. Before issue #28 every process ran the table
checks and column migrations of the history, lock and ledger tables (DDL transactions under an
advisory lock, with catalog queries); now a process reads the schema version once (a catalog
lookup and one SELECT) and checks nothing else. Both are timed in fresh processes on a throwaway
PostgreSQL (tests/support/postgres.py), opening the store, taking and releasing a suite lock and
reading the ledger, side by side (the driver's import and the first connection, the same in both,
are left out):

    python bench/team_open.py            # 7 rounds
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

CHILD = r"""
import sys, time
mode, url = sys.argv[1], sys.argv[2]
from evalloop.history import engine as e
from evalloop.history.locks import DatabaseLock
from evalloop.history.store import HistoryStore
from evalloop.scheduling import ledger
from evalloop.history import version
raw = e.new_engine(url)  # untimed: the driver's import and the first connection are the same
with raw.connect():
    pass
t = time.perf_counter()
if mode == "before":  # what every process did: check and migrate every table group
    from evalloop.history.locks import LOCK_TABLES
    from evalloop.history.models import HISTORY_TABLES, metadata
    from evalloop.history.schema import ensure_tables
    ensure_tables(raw, metadata, tables=HISTORY_TABLES)  # (the column checks it ran then are gone)
    ensure_tables(raw, metadata, tables=LOCK_TABLES)
    ensure_tables(raw, metadata, tables=[ledger.ENTRIES])
else:  # what get_engine does now
    assert version.check(raw, url) == "current"
    e._VERIFIED.add(raw)
e._ENGINES[url] = raw
HistoryStore(url)
with DatabaseLock(url, "suite:bench"):
    ledger.entries(url, "none")
print(f"{(time.perf_counter() - t) * 1000:.1f}")
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    from support.postgres import start_server

    server = start_server()
    try:
        url = server.create_database()
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        from evalloop.history.store import HistoryStore

        HistoryStore(url)  # the tables, stamped (as the first host's first run makes them)
        subprocess.run([sys.executable, "-c", CHILD, "now", url], check=True, env=env, capture_output=True)
        times: dict[str, list[float]] = {"before": [], "now": []}
        for _ in range(args.rounds):
            for mode in times:
                out = subprocess.run([sys.executable, "-c", CHILD, mode, url], check=True, env=env,
                                     capture_output=True, text=True).stdout
                times[mode].append(float(out.split()[-1]))
        print(f"{'open a current shared history':34} {'before':>10} {'now':>10}")
        print(f"{'(store + suite lock + ledger), ms':34} {statistics.median(times['before']):>10.1f} "
              f"{statistics.median(times['now']):>10.1f}")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
