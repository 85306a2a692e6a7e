"""Writing a run's case rows to a SQLite history: one row to a statement, against many.

A 10,000-case run with one scorer writes 20,000 rows (a case result and a score per case), in
batches of 1,000 cases, one transaction each. This times the same rows, written into a fresh
history each round (schema and indexes as evalloop makes them), three ways side by side:

- ``executemany``: the DB-API's one row per step (how evalloop wrote them before);
- ``HistoryStore.add_results``: as evalloop writes them now (many rows to a statement, up to
  SQLite's 999 parameters);
- ``add_results`` with mappings instead of tuples (the path other callers take).

    python bench/insert_rows.py
    python bench/insert_rows.py --cases 50000 --rounds 9
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from evalloop.history.models import Run
from evalloop.history.store import CASE_RESULT_COLUMNS, CASE_SCORE_COLUMNS, HistoryStore

BATCH = 1000


def rows(n: int) -> tuple[list[tuple], list[tuple]]:
    cases = [("r", f"case-{i}", 0, None, f'"text {i}"', None, None, 0.01, 0.0, 0, 0, None, None, None)
             for i in range(n)]
    scores = [("r", f"case-{i}", 0, "equals", 1.0, False, False, "equal", None) for i in range(n)]
    return cases, scores


def executemany(store: HistoryStore, cases: list[tuple], scores: list[tuple]) -> None:
    """The rows one to a step, as ``executemany`` writes them."""
    for start in range(0, len(cases), BATCH):
        with store.engine.begin() as conn:
            cursor = conn.connection.driver_connection.cursor()
            for table, columns, part in (("case_results", CASE_RESULT_COLUMNS, cases[start:start + BATCH]),
                                         ("case_scores", CASE_SCORE_COLUMNS, scores[start:start + BATCH])):
                cursor.executemany(f"INSERT INTO {table} ({', '.join(columns)}) "
                                   f"VALUES ({', '.join('?' * len(columns))})", part)
            cursor.close()


def add_results(store: HistoryStore, cases: list[tuple], scores: list[tuple]) -> None:
    for start in range(0, len(cases), BATCH):
        store.add_results(cases[start:start + BATCH], scores[start:start + BATCH])


def add_mappings(store: HistoryStore, cases: list[tuple], scores: list[tuple]) -> None:
    as_case = [dict(zip(CASE_RESULT_COLUMNS, r, strict=True)) for r in cases]
    as_score = [dict(zip(CASE_SCORE_COLUMNS, r, strict=True)) for r in scores]
    for start in range(0, len(cases), BATCH):
        store.add_results(as_case[start:start + BATCH], as_score[start:start + BATCH])


WAYS: dict[str, Callable[[HistoryStore, list[tuple], list[tuple]], None]] = {
    "executemany (before)": executemany, "add_results (tuples)": add_results,
    "add_results (mappings)": add_mappings,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    cases, scores = rows(args.cases)
    took: dict[str, list[float]] = {name: [] for name in WAYS}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            order = list(WAYS) if r % 2 == 0 else list(reversed(WAYS))
            for name in order:
                store = HistoryStore(f"sqlite:///{Path(tmp) / f'{r}-{list(WAYS).index(name)}.db'}")
                store.begin_run(Run(id="r", suite="s"))
                started = time.perf_counter()
                WAYS[name](store, cases, scores)
                took[name].append(time.perf_counter() - started)
                store.engine.dispose()
    base = statistics.median(took["executemany (before)"])
    print(f"{2 * args.cases:,} rows ({args.cases:,} cases, batches of {BATCH:,}), median of {args.rounds} rounds")
    for name, times in took.items():
        med = statistics.median(times)
        print(f"{name:24s} {med * 1000:7.1f} ms  {med * 1e6 / (2 * args.cases):5.2f} µs a row  {med / base:5.2f}×")


if __name__ == "__main__":
    main()
