"""Benchmark the embedded memory store: insert rate and hybrid ``find`` latency at k=10.

Stores N synthetic memories (default 100,000) once through the sqlite-vec path
(``EVALLOOP_SQLITE_VEC=on``) and once through the default exact NumPy path, then times the same
queries on both and prints the figures side by side, with the vector recall@10 of the
quantised path against exact search.
Pinned to one core (BLAS threads = 1). Target: hybrid find p95 < 50 ms at 100,000 memories.

    .venv/bin/python bench/memory_bench.py [--n 100000] [--queries 200]
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import random  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from evalloop.memory import MemoryStore, default_embedder  # noqa: E402

SUBJECTS = (
    "eval run",
    "merge step",
    "similarity scorer",
    "retrieval suite",
    "prompt revision",
    "judge model",
    "baseline window",
    "cache layer",
    "token budget",
    "memory store",
    "embedding index",
    "scheduler job",
    "fixture loader",
    "webhook",
    "report writer",
    "database migration",
    "rate limiter",
    "auth flow",
    "search API",
    "summary prompt",
    "deduplication pass",
    "ranking model",
    "queue worker",
    "config loader",
)
VERBS = (
    "regressed after",
    "improved with",
    "failed on",
    "timed out during",
    "duplicated",
    "skipped",
    "misclassified",
    "dropped",
    "over-counted",
    "slowed down after",
    "crashed on",
    "ignored",
    "mislabelled",
    "recovered after",
    "stalled on",
    "rejected",
    "accepted",
)
OBJECTS = (
    "paraphrased inputs",
    "long documents",
    "empty answers",
    "unicode names",
    "nested JSON",
    "stale cache entries",
    "expired tokens",
    "near-duplicate memories",
    "multi-turn dialogues",
    "tables",
    "code snippets",
    "numeric answers",
    "dates in UK format",
    "mixed-language queries",
    "large batches",
    "concurrent writes",
    "retries with backoff",
    "null expected values",
    "tool calls",
    "system prompts",
)
DETAILS = (
    "in the nightly build",
    "on the staging cluster",
    "for customer tickets",
    "since the model upgrade",
    "with the new tokenizer",
    "under heavy load",
    "on Mondays",
    "after the schema change",
    "for German users",
    "in the CSV import",
    "with temperature 0.7",
    "in the canary release",
    "for short queries",
    "on ARM machines",
    "in the batch API",
    "when the cache was cold",
)


def synthetic(n: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        parts = [rng.choice(SUBJECTS), rng.choice(VERBS), rng.choice(OBJECTS), rng.choice(DETAILS)]
        out.append(" ".join(parts) + f" (ticket {i}, score {rng.random():.2f})")
    return out


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def build(path: Path, texts: list[str], tags: list[list[str]], numpy_path: bool) -> MemoryStore:
    os.environ["EVALLOOP_SQLITE_VEC"] = "off" if numpy_path else "on"
    try:
        store = MemoryStore(path)
    finally:
        os.environ.pop("EVALLOOP_SQLITE_VEC", None)
    return store


def timed_inserts(store: MemoryStore, texts: list[str], tags: list[list[str]]) -> float:
    items = [{"information": t, "tags": g} for t, g in zip(texts, tags, strict=True)]
    start = time.perf_counter()
    store.store_many(items)
    return len(items) / (time.perf_counter() - start)


def time_queries(store: MemoryStore, queries: list[str], tag: str | None) -> list[float]:
    store.find(queries[0], limit=10)  # warm caches
    times = []
    for q in queries:
        start = time.perf_counter()
        store.find(q, limit=10, tags=[tag] if tag else None)
        times.append((time.perf_counter() - start) * 1000)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()

    texts = synthetic(args.n)
    rng = random.Random(3)
    tags = [["bench", f"team-{rng.randrange(50)}"] for _ in texts]
    queries = [t.split(" (ticket")[0] for t in synthetic(args.queries, seed=99)]
    embedder = default_embedder()
    start = time.perf_counter()
    embedder.embed(texts[:5000])
    embed_rate = 5000 / (time.perf_counter() - start)

    rows: dict[str, dict[str, float]] = {}
    hits: dict[str, list[list[str]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for label, numpy_path in (("sqlite-vec", False), ("numpy", True)):
            store = build(Path(tmp) / f"{label}.db", texts, tags, numpy_path)
            assert store.vector_backend == label, store.vector_backend
            rate = timed_inserts(store, texts, tags)
            hybrid = time_queries(store, queries, None)
            tagged = time_queries(store, queries, "team-7")
            qv = embedder.embed(queries)
            vec_times, vec_hits = [], []
            for v in qv:
                t0 = time.perf_counter()
                vec_hits.append([pk for pk, _ in store._index.search(v, 10, None)])
                vec_times.append((time.perf_counter() - t0) * 1000)
            hits[label] = vec_hits
            rows[label] = {
                "insert/s": rate,
                "find p50 ms": percentile(hybrid, 50),
                "find p95 ms": percentile(hybrid, 95),
                "tag find p95 ms": percentile(tagged, 95),
                "vector p50 ms": percentile(vec_times, 50),
                "vector p95 ms": percentile(vec_times, 95),
            }
            store.close()

    recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(hits["sqlite-vec"], hits["numpy"], strict=True)])
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"memories: {args.n:,}  queries: {args.queries}  k=10  dim={embedder.dim}  one core")
    print(f"load average at the end (1/5/15 min): {load} on {os.cpu_count()} CPUs")
    print(f"embedding rate (static model, alone): {embed_rate:,.0f} texts/s")
    print(f"{'':18}{'sqlite-vec':>14}{'numpy':>14}{'ratio':>10}")
    for key in rows["sqlite-vec"]:
        a, b = rows["sqlite-vec"][key], rows["numpy"][key]
        print(f"{key:18}{a:>14,.1f}{b:>14,.1f}{a / b:>10.2f}")
    print(f"vector recall@10 of sqlite-vec (binary KNN + rescore) vs exact NumPy: {recall:.3f}")
    verdict = "meets" if rows["sqlite-vec"]["find p95 ms"] < 50 else "MISSES"
    print(f"hybrid find p95 (sqlite-vec) {verdict} the 50 ms target")


if __name__ == "__main__":
    main()
