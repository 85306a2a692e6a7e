"""The viewer on a large run: how long a 10,000-case run's pages take over real HTTP.

A throwaway project runs a ``controlled`` suite of N cases three times (the second run loses 5%
of its cases, the third 10%), then ``evalloop view`` serves it on 127.0.0.1 and each page is
fetched with httpx: the latest run's page on the first request (the viewer starts reading every
suite's latest run when it starts; the request waits for that read) and again (kept: a finished
run never changes), a filtered page, a later page, the run before it, the oldest run (read by
nothing before: the cold path), the latest run compared with the one before (read ahead at
start) and with the oldest (cold); then, on a viewer whose start-up reading is done, the first
request of the latest run, its comparison with the run before, and the suite page. The issue's
target is a 10k-case run's page in under a second; "again" figures are the median of
``--repeat`` fetches (a first request is single: only the first is cold), printed beside the
page's size. ``--dir`` keeps the project (and reuses its runs); the pages are read over HTTP
only, so a copy of this script in another checkout times that checkout's viewer on the same
project (it puts its own checkout's ``src`` first on the path).
Run: ``.venv/bin/python bench/view_large_run.py [--cases N] [--repeat R]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "src"))

import httpx  # noqa: E402

from evalloop.config import load_settings  # noqa: E402
from evalloop.history.store import HistoryStore  # noqa: E402
from evalloop.loop.pipeline import run_suite  # noqa: E402
from support.project import controlled_suite, make_project, write_answers  # noqa: E402
from support.viewer import serving  # noqa: E402

TARGET_SECONDS = 1.0
RUNS = 3


def _fetch(client: httpx.Client, url: str) -> tuple[float, int]:
    start = time.perf_counter()
    res = client.get(url)
    took = time.perf_counter() - start
    assert res.status_code == 200, (url, res.status_code)
    return took, len(res.content)


def _median(client: httpx.Client, url: str, repeat: int) -> tuple[float, int]:
    runs = [_fetch(client, url) for _ in range(repeat)]
    return statistics.median(t for t, _ in runs), runs[0][1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--dir", type=Path, help="keep the project here (and reuse it when it has the runs)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = args.dir or Path(tmp)
        if not (root / "history" / "evalloop.db").is_file():
            make_project(root, {"controlled": controlled_suite(args.cases)})
        answers = root / "answers.json"
        os.environ["EVALLOOP_TEST_ANSWERS"] = str(answers)
        sys.path.insert(0, str(root))
        settings = load_settings(root)
        store = HistoryStore(settings.database_url)
        made = store.count_runs("controlled")
        start = time.perf_counter()
        for k in range(made, RUNS):  # the second loses 5% of the cases, the third 10%
            write_answers(answers, {f"c{i}": 0.1 if i % 20 < k else 0.9 for i in range(args.cases)})
            run_suite("controlled", settings=settings)
        if made < RUNS:
            print(f"{RUNS - made} runs of {args.cases} cases stored in {time.perf_counter() - start:.1f} s")
        a, b, c = [r.id for r in store.runs("controlled", limit=RUNS)][::-1]
        with serving(settings) as base, httpx.Client(base_url=base, timeout=120) as client:
            rows = [("latest run, 1st request", *_fetch(client, f"/runs/{c}"))]
            for label, path in (("latest run, again", f"/runs/{c}"),
                                ("latest run, failing only", f"/runs/{c}?failing=1"),
                                ("latest run, page 100", f"/runs/{c}?page=100")):
                rows.append((label, *_median(client, path, args.repeat)))
            rows.append(("run before it, 1st", *_fetch(client, f"/runs/{b}")))
            rows.append(("oldest run, 1st (cold)", *_fetch(client, f"/runs/{a}")))
            rows.append(("compare before->latest", *_fetch(client, f"/compare/{b}/{c}")))
            rows.append(("  again", *_median(client, f"/compare/{b}/{c}", args.repeat)))
            rows.append(("compare oldest->latest", *_fetch(client, f"/compare/{a}/{c}")))
            rows.append(("suite page", *_fetch(client, "/suites/controlled")))
            rows.append(("home", *_fetch(client, "/")))
        # a viewer started a while ago: its start-up reading (the latest runs, the suites' pages,
        # the latest comparisons) is done before the first request
        with serving(settings) as base, httpx.Client(base_url=base, timeout=120) as client:
            start = time.perf_counter()
            for thread in threading.enumerate():
                if thread.name == "evalloop-view-warm":
                    thread.join()
            rows.append(("(start-up reading)", time.perf_counter() - start, 0))
            rows.append(("then latest run, 1st", *_fetch(client, f"/runs/{c}")))
            rows.append(("then compare, 1st", *_fetch(client, f"/compare/{b}/{c}")))
            rows.append(("then suite page, 1st", *_fetch(client, "/suites/controlled")))
    print(f"{'page':<26} {'seconds':>8} {'KB':>7}  (target: a run's page under {TARGET_SECONDS:.1f} s)")
    for label, took, size in rows:
        flag = "" if took < TARGET_SECONDS or label.startswith("(") else "  over the target"
        print(f"{label:<26} {took:8.3f} {size / 1024:7.1f}{flag}")


if __name__ == "__main__":
    main()
