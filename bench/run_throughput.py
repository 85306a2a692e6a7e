"""LLM-bound run throughput: a 1,000-case `decide` suite on the llm engine through the real runner.

``--sync``: the same cases answered by a *blocking* target of the project — the real ``anthropic``
SDK's sync client, one ``messages.create`` per case, as a user's own code calls it — with the
project's defaults (``target_threads`` unset: evalloop moves the calls to threads once they block,
:mod:`evalloop.run.placement`). Its reference is the same sync calls on a 32-thread pool; the
target is within 1.15x of the ideal (issue #39).

``evalloop.loop.pipeline.run_suite`` (suite loading, runner, scorers, history writes, baseline
comparison) with ``engine="llm"`` and no cache, against a loopback Messages-API server that
takes 200 ms per call, at concurrency 32. The ideal is cases * latency / concurrency (6.25 s);
the target is within 1.20x of it (issue #16). A bare ``AnthropicClient`` loop making the same calls at the
same concurrency is measured before and after it (their mean is the reference), so the
runner's own overhead shows as the ratio, and the load on a shared machine shows in both.
The server runs in its own process, as a real API would, so it does not share the GIL.
``--load N`` keeps N busy-loop processes spinning during the timings, so the figure under load
on a shared machine is reproducible; CPU per call (this process's CPU time over the calls; the
server's is not counted) is printed beside each time, as it sets the ratio once cores are busy.
Run: ``.venv/bin/python bench/run_throughput.py [--cases N] [--concurrency C] [--latency S] [--load N] [--sync]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "src"))

from evalloop import RunOptions  # noqa: E402
from evalloop.config import load_settings  # noqa: E402
from evalloop.llm import AnthropicClient  # noqa: E402
from evalloop.llm.structured import structured  # noqa: E402
from evalloop.loop.pipeline import run_suite  # noqa: E402
from evalloop.reference.memory_ops import Decision, system_prompt  # noqa: E402
from evalloop.untrusted import fence  # noqa: E402
from support.messages_server import LLMServer, Reply, Seen  # noqa: E402

TARGET = 1.20
SYNC_TARGET = 1.15

#: a blocking target, as a user writes one: the sync SDK client, one call per case
SYNC_SUT = """
import os
import anthropic

_client = anthropic.Anthropic(api_key=os.environ["ANTHROPIC_API_KEY"], base_url=os.environ["ANTHROPIC_BASE_URL"],
                              max_retries=0, timeout=30.0)
TOOL = {"name": "decide", "description": "What to do with the incoming memory.",
        "input_schema": {"type": "object", "required": ["action", "reason"],
                         "properties": {"action": {"type": "string"}, "reason": {"type": "string"}}}}


def decide(input):
    prompt = f"Existing: {input['existing']['content']}\\nIncoming: {input['incoming']['content']}"
    message = _client.messages.create(model="claude-haiku-4-5", max_tokens=256, tools=[TOOL],
                                      tool_choice={"type": "tool", "name": "decide"},
                                      messages=[{"role": "user", "content": prompt}])
    return next(block.input for block in message.content if block.type == "tool_use")
"""


def answer(seen: Seen) -> Reply:
    return Reply.of_tool({"action": "UPDATE", "reason": "same subject"}, input_tokens=120, output_tokens=24)


def serve(latency: float, conn) -> None:
    """The loopback server in its own process (as a real API is), reporting its counters on request."""
    with LLMServer(answer, latency=latency) as server:
        conn.send(server.url)
        while conn.recv() == "stats":
            conn.send((server.count, server.max_active, time.process_time()))
            server.max_active = 0


def spin(stop) -> None:
    """A busy loop (one core's worth of load) until ``stop`` is set."""
    while not stop.is_set():
        sum(range(10_000))


def write_suite(project: Path, cases: int, sync: bool = False) -> None:
    fixtures = project / "fixtures"
    fixtures.mkdir(parents=True)
    with (fixtures / "decide-bench.jsonl").open("w", encoding="utf-8") as out:
        for i in range(cases):
            case = {"id": f"c{i:04d}", "input": {
                "existing": {"id": f"mem_{i}", "content": f"Service {i} pool max is 20 connections"},
                "incoming": {"content": f"Service {i} pool max is now {30 + i % 50} connections"},
                "expectSimilar": True}, "expected": {"action": "UPDATE"}}
            out.write(json.dumps(case) + "\n")
    target = "sut:decide" if sync else "evalloop.reference.memory_ops:decide"
    if sync:
        (project / "sut.py").write_text(SYNC_SUT, encoding="utf-8")
    (fixtures / "decide-bench.yaml").write_text(
        f"name: decide-bench\ntarget: {target}\n"
        "scorers: [similarity-detection]\ncases: decide-bench.jsonl\n", encoding="utf-8")


def bench_run(project: Path, concurrency: int) -> tuple[float, float, dict]:
    settings = load_settings(project)
    started, cpu = time.perf_counter(), time.process_time()
    report = run_suite("decide-bench", RunOptions(engine="llm", cache="off", concurrency=concurrency),
                       settings=settings)
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    run = report.executed.run
    return elapsed, cpu, {"status": run.status, "calls": run.llm_calls, "mean":
                          report.executed.summaries["similarity-detection"].mean, "cost": run.cost_usd}


def bench_sync_client(project: Path, cases: int, concurrency: int) -> tuple[float, float]:
    """The sync target's calls on a plain thread pool of ``concurrency`` threads (the reference)."""
    from concurrent.futures import ThreadPoolExecutor

    sys.path.insert(0, str(project))
    import sut  # type: ignore[import-not-found]  # the project's target, written by write_suite

    inputs = [{"existing": {"content": f"Service {i} pool max is 20 connections"},
               "incoming": {"content": f"Service {i} pool max is now {30 + i % 50} connections"}}
              for i in range(cases)]
    started, cpu = time.perf_counter(), time.process_time()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(sut.decide, inputs))
    return time.perf_counter() - started, time.process_time() - cpu


async def bench_client(url: str, cases: int, concurrency: int) -> tuple[float, float]:
    client = AnthropicClient(api_key="bench", base_url=url, concurrency=concurrency, timeout=30.0)
    system = system_prompt("decide")

    async def one(i: int) -> Decision:
        prompt = (f"{fence('EXISTING MEMORY', f'Service {i} pool max is 20 connections')}\n\n"
                  f"{fence('INCOMING MEMORY', f'Service {i} pool max is now {30 + i % 50} connections')}")
        return await structured(client, Decision, prompt=prompt, system=system, max_tokens=256)

    started, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(one(i) for i in range(cases)))
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    await client.aclose()
    return elapsed, cpu


def main(cases: int, concurrency: int, latency: float, load: int, sync: bool = False) -> int:
    ideal = max(cases * latency / concurrency, 1e-9)
    target = SYNC_TARGET if sync else TARGET
    print(f"{cases} decide cases, concurrency {concurrency}, {latency * 1000:.0f} ms per call, no cache, "
          f"{load} busy-loop process{'es' if load != 1 else ''}"
          + (", a blocking target (the sync anthropic SDK)" if sync else ""))
    print(f"ideal {ideal:.2f} s, target <= {target:.2f}x = {ideal * target:.2f} s")
    for name in [n for n in os.environ if n.startswith(("ANTHROPIC_", "EVALLOOP_"))]:
        del os.environ[name]
    ours, theirs = multiprocessing.Pipe()
    server = multiprocessing.get_context("spawn").Process(target=serve, args=(latency, theirs), daemon=True)
    server.start()
    url = ours.recv()
    stop = multiprocessing.Event()
    spinners = [multiprocessing.Process(target=spin, args=(stop,), daemon=True) for _ in range(load)]
    for spinner in spinners:
        spinner.start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            os.environ.update(ANTHROPIC_API_KEY="bench", ANTHROPIC_BASE_URL=url,
                              EVALLOOP_LLM_CONCURRENCY=str(concurrency))
            project = Path(tmp)
            write_suite(project, cases, sync)

            def reference() -> tuple[float, float]:
                if sync:
                    return bench_sync_client(project, cases, concurrency)
                return asyncio.run(bench_client(url, cases, concurrency))

            ours.send("stats")
            *_, server_cpu = ours.recv()
            before, before_cpu = reference()
            ours.send("stats")
            bare_requests, bare_peak, server_after = ours.recv()
            server_cpu = server_after - server_cpu
            elapsed, run_cpu, info = bench_run(project, concurrency)
            ours.send("stats")
            total, run_peak, _ = ours.recv()
            after, after_cpu = reference()  # the reference brackets the run
            ours.send("stats")
            ours.recv()
            bare, bare_cpu = (before + after) / 2, (before_cpu + after_cpu) / 2
            loadavg = os.getloadavg()
    finally:
        stop.set()
        for spinner in spinners:
            spinner.join(5)
        ours.send("stop")
        server.join(5)
    run_requests = total - bare_requests
    print(f"load average (1/5/15 min): {', '.join(f'{x:.1f}' for x in loadavg)} on {os.cpu_count()} CPUs")
    label = "bare sync SDK thread pool" if sync else "bare AnthropicClient loop"
    print(f"{label:<28} {bare:6.2f} s  ratio {bare / ideal:4.2f}  "
          f"CPU {bare_cpu / cases * 1e6:5.0f} us/call  (before {before:.2f} s, after {after:.2f} s)  "
          f"requests {bare_requests}  peak in flight {bare_peak}")
    print(f"{'run_suite (runner+history)':<28} {elapsed:6.2f} s  ratio {elapsed / ideal:4.2f}  "
          f"CPU {run_cpu / cases * 1e6:5.0f} us/call  requests {run_requests}  peak in flight {run_peak}  "
          f"status {info['status']}  mean {info['mean']:.2f}  cost ${info['cost']:.4f}")
    print(f"runner overhead over the bare loop: {elapsed / bare:4.2f}x; "
          f"the loopback server's CPU (its own process): {server_cpu / cases * 1e6:.0f} us/call")
    ok = elapsed / ideal <= target and run_requests == cases and info["status"] == "completed"
    print("PASS" if ok else "FAIL", f"run_suite ratio {elapsed / ideal:.2f} (target <= {target})")
    return 0 if ok else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--load", type=int, default=0, help="busy-loop processes to run during the timings")
    parser.add_argument("--sync", action="store_true", help="a blocking target (the sync SDK) instead of the async one")
    args = parser.parse_args()
    sys.exit(main(args.cases, args.concurrency, args.latency, args.load, args.sync))
