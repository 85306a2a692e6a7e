"""Calls against a provider's request quota: the adaptive limiter beside none, side by side.

The loopback server (its own thread) plays a provider with a request bucket of ``--quota``
requests refilled over ``--period`` seconds (``tests/support/ratelimits.py``): a 429 with
``retry-after`` past it, the rate-limit headers on every reply. ``--calls`` calls at
``--concurrency`` go through the real Anthropic client, once with the limiter
(:mod:`evalloop.llm.ratelimit`) and once with ``rate_limits=False`` (each call retrying on its own,
as before), in alternating rounds. The ideal time is what the quota allows: the bucket's
``quota`` at once, then ``quota / period`` a second.

    python bench/rate_limits.py                      # 120 calls, quota 20 per 2 s, concurrency 32
    python bench/rate_limits.py --rounds 3 --openai  # the OpenAI-compatible client
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from evalloop.llm import AnthropicClient, LLMCallFailed, LLMRequest, Message, OpenAICompatClient  # noqa: E402
from support.messages_server import LLMServer  # noqa: E402
from support.ratelimits import Quota  # noqa: E402


async def one_round(adaptive: bool, args: argparse.Namespace, key: str) -> dict[str, float]:
    quota = Quota(args.quota, args.period)
    with LLMServer(quota) as server:
        options = {"concurrency": args.concurrency, "rate_limits": adaptive, "max_retries": args.retries}
        client = (OpenAICompatClient(server.openai_url, "m", api_key=key, **options) if args.openai
                  else AnthropicClient(api_key=key, base_url=server.url, **options))
        request = LLMRequest(model="claude-haiku-4-5", messages=[Message(role="user", content="hi")])
        started = time.perf_counter()
        results = await asyncio.gather(*(client.complete(request) for _ in range(args.calls)), return_exceptions=True)
        elapsed = time.perf_counter() - started
        await client.aclose()
    failed = sum(1 for r in results if isinstance(r, LLMCallFailed))
    return {"seconds": elapsed, "429s": quota.rejected, "failed": failed, "requests": server.count}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=120)
    parser.add_argument("--quota", type=int, default=20)
    parser.add_argument("--period", type=float, default=2.0)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--retries", type=int, default=4, help="the client's max_retries (default as shipped)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--openai", action="store_true")
    args = parser.parse_args()
    ideal = max(0.0, args.calls - args.quota) / (args.quota / args.period)
    print(f"{args.calls} calls at concurrency {args.concurrency}, a quota of {args.quota} requests refilled over "
          f"{args.period:g} s ({'OpenAI-compatible' if args.openai else 'Anthropic'} client, max_retries "
          f"{args.retries}); ideal {ideal:.1f} s")
    got: dict[bool, list[dict[str, float]]] = {True: [], False: []}
    for i in range(args.rounds):
        for adaptive in (True, False) if i % 2 == 0 else (False, True):
            got[adaptive].append(asyncio.run(one_round(adaptive, args, key=f"bench-{i}-{adaptive}")))
    print(f"{'limiter':<10} {'wall s':>7} {'× ideal':>8} {'429s':>6} {'requests':>9} {'failed calls':>13}")
    for adaptive, rounds in got.items():
        def med(name: str, rounds: list[dict[str, float]] = rounds) -> float:
            return statistics.median(r[name] for r in rounds)
        print(f"{'adaptive' if adaptive else 'none':<10} {med('seconds'):>7.2f} {med('seconds') / ideal:>7.2f}× "
              f"{med('429s'):>6.0f} {med('requests'):>9.0f} {med('failed'):>13.0f}")
    print(f"(medians of {args.rounds} alternating rounds; failed calls: still rate-limited after the retries)")


if __name__ == "__main__":
    main()
