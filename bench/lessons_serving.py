"""``evalloop.lessons()`` against a memory service that accepts connections and never answers.

Side by side, in one process: the time one read of the suite's lessons takes without a bound
(``injected_for``, which waits out the memory service's own ``timeout``), and the time
``evalloop.lessons()`` takes cold (nothing good to serve), after the breaker opened, and served
from its cache. Each figure is the median of ``--rounds`` calls.

Usage: ``python bench/lessons_serving.py [--timeout 2] [--rounds 5]``.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import tempfile
import threading
import time
from pathlib import Path

import yaml


def silent() -> tuple[socket.socket, str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                held.append(sock.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    return sock, f"http://127.0.0.1:{sock.getsockname()[1]}"


def median_seconds(fn, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=2.0, help="the memory service's timeout (s)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    import logging

    logging.getLogger("evalloop.lessons").setLevel(logging.ERROR)  # the warnings the bench provokes
    from evalloop import load_settings
    from evalloop.learning import lessons as lessons_module
    from evalloop.learning.injection import injected_for
    from evalloop.suites.lookup import find_suite

    sock, url = silent()
    with tempfile.TemporaryDirectory(prefix="evalloop-lessons-bench-") as tmp:
        root = Path(tmp)
        (root / "fixtures").mkdir()
        suite = {"name": "faq", "target": "sut:answer", "scorers": ["equals"],
                 "cases": [{"id": f"c{i}", "input": f"q {i}", "expected": f"a {i}"} for i in range(10)]}
        (root / "fixtures" / "faq.yaml").write_text(yaml.safe_dump(suite))
        (root / "evalloop.toml").write_text(f'memory_url = "{url}"\n[memory_http]\ntimeout = {args.timeout}\n')
        settings = load_settings(root)
        found = find_suite("faq", root)
        unbounded = median_seconds(lambda: injected_for(settings, found), args.rounds)
        lessons_module.clear_cache()
        cold = median_seconds(lambda: (lessons_module.clear_cache(), lessons_module.lessons("faq", root)),
                              args.rounds)
        lessons_module.clear_cache()
        for _ in range(lessons_module.BREAK_AFTER):
            lessons_module.lessons("faq", root)
        broken = median_seconds(lambda: lessons_module.lessons("faq", root), args.rounds)
    sock.close()
    print(f"one read, unbounded (service timeout {args.timeout:g} s): {unbounded * 1000:8.1f} ms")
    print(f"lessons(), nothing cached (wait 0.3 s):        {cold * 1000:8.1f} ms  "
          f"({unbounded / cold:.1f}x faster)")
    print(f"lessons(), breaker open:                        {broken * 1000:8.3f} ms  "
          f"({unbounded / broken:.0f}x faster)")


if __name__ == "__main__":
    main()
