"""LLM-bound throughput: 1,000 calls at concurrency 32 against a loopback server (200 ms/call).

The ideal is calls * latency / concurrency (6.25 s); the target is within 1.25x of it. Both
clients are measured side by side in one run, plus a cached rerun that must make no requests.
Run: ``.venv/bin/python bench/llm_throughput.py [--calls N] [--concurrency C] [--latency S]``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from evalloop.llm import (  # noqa: E402
    AnthropicClient,
    CachedClient,
    LLMClient,
    LLMRequest,
    Message,
    OpenAICompatClient,
    UsageTotals,
    usage_scope,
)
from support.messages_server import LLMServer  # noqa: E402

TARGET = 1.25


def request(i: int, model: str) -> LLMRequest:
    return LLMRequest(model=model, messages=[Message(role="user", content=f"call {i}")])


async def timed(client: LLMClient, calls: int, model: str) -> tuple[float, UsageTotals]:
    started = time.perf_counter()
    with usage_scope() as totals:
        await asyncio.gather(*(client.complete(request(i, model)) for i in range(calls)))
    return time.perf_counter() - started, totals


async def main(calls: int, concurrency: int, latency: float) -> int:
    ideal = calls * latency / concurrency
    print(f"{calls} calls, concurrency {concurrency}, {latency * 1000:.0f} ms per call")
    print(f"ideal {ideal:.2f} s, target <= {TARGET:.2f}x = {ideal * TARGET:.2f} s")
    worst = 0.0
    with LLMServer(latency=latency) as server, tempfile.TemporaryDirectory() as tmp:
        options = {"concurrency": concurrency, "timeout": 30.0}
        anthropic_client = AnthropicClient(api_key="bench", base_url=server.url, **options)
        openai_client = OpenAICompatClient(server.openai_url, "local-model", **options)
        cached = CachedClient(anthropic_client, Path(tmp) / "cache.sqlite")
        runs: list[tuple[str, LLMClient, str]] = [
            ("anthropic SDK", anthropic_client, "claude-haiku-4-5"),
            ("openai-compat", openai_client, "local-model"),
            ("anthropic + cache (fill)", cached, "claude-haiku-4-5"),
        ]
        for label, client, model in runs:
            before = server.count
            elapsed, totals = await timed(client, calls, model)
            ratio = elapsed / ideal
            worst = max(worst, ratio)
            print(
                f"{label:<26} {elapsed:6.2f} s  ratio {ratio:4.2f}  "
                f"requests {server.count - before}  retries {totals.retries}  "
                f"peak in flight {server.max_active}"
            )
        before = server.count
        elapsed, totals = await timed(cached, calls, "claude-haiku-4-5")
        print(
            f"{'anthropic + cache (rerun)':<26} {elapsed:6.2f} s  "
            f"requests {server.count - before}  cache hits {totals.cache_hits}"
        )
        await anthropic_client.aclose()
        await openai_client.aclose()
        cached.cache.close()
    ok = worst <= TARGET
    print(f"worst ratio {worst:.2f} ({'PASS' if ok else 'FAIL'}: target <= {TARGET})")
    return 0 if ok else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--latency", type=float, default=0.2, help="seconds per call (> 0)")
    args = parser.parse_args()
    sys.exit(asyncio.run(main(args.calls, args.concurrency, args.latency)))
