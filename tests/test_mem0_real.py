"""Against a real mem0 (``mem0ai`` 2.2.x behind its REST shape, local Qdrant, evalloop's embedder on
loopback): failure memories are written, found, listed, updated and resolved there with 30
memories of other suites in scope, and a shipped retrieval suite benchmarks mem0 by config alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx

from evalloop import load_settings, run_suite
from evalloop.learning import incidents as learning
from evalloop.learning import injection
from evalloop.memory.adapters import HTTPMemoryAdapter, HTTPMemoryConfig
from support.mem0_server import Mem0Server, mem0_server, needs_mem0  # noqa: F401
from test_learning_lifecycle import make

pytestmark = needs_mem0
OTHERS = ["regression", "eval-failure", "decisions-v2"] + [f"suite-{i}" for i in range(27)]


def seed_others(adapter: HTTPMemoryAdapter) -> None:
    for suite in OTHERS:  # 30 open incidents of other suites, some named like our tags
        adapter.store(f'Eval "{suite}" regression: similarity-detection — decisions failed on port cases',
                      tags=learning.failure_tags(suite, "similarity-detection"),
                      metadata={"kind": "eval-failure", "eval_suite": suite, "scorer": "similarity-detection",
                                "status": "open", "last_seen": "2026-01-01", "run_id": "r-old"})


def test_adapter_speaks_mem0(mem0_server: Mem0Server) -> None:  # noqa: F811
    adapter = HTTPMemoryAdapter(HTTPMemoryConfig(base_url=mem0_server.url, user_id="adapter-test"))
    seed_others(adapter)
    mine = adapter.store("OAuth tokens need a 5 minute buffer", tags=["eval-failure", "suite:auth", "status:open"],
                         metadata={"eval_suite": "auth", "run_id": "r-1"})
    hits = adapter.find("OAuth buffer", limit=3, tags=["suite:auth", "status:open"])
    assert [h.record.id for h in hits] == [mine]                    # exact tags among 30 others
    assert hits[0].record.metadata["eval_run_id"] == "r-1"          # reserved key kept, renamed
    scoped = adapter.find("tokens", limit=1, where={"eval_suite": "auth"})
    assert [h.record.id for h in scoped] == [mine]                  # metadata filter, no score cut-off
    listed = adapter.list(tags=["eval-failure", "suite:regression"])
    assert [r.metadata["eval_suite"] for r in listed] == ["regression"]
    assert len(adapter.list(limit=200)) == 31
    adapter.update(mine, "OAuth tokens need a 10 minute buffer", tags=["eval-failure", "suite:auth", "status:resolved"],
                   metadata={"eval_suite": "auth", "status": "resolved"})
    (after,) = adapter.list(tags=["suite:auth"])
    assert after.information == "OAuth tokens need a 10 minute buffer" and after.metadata["status"] == "resolved"
    assert adapter.list(tags=["suite:auth", "status:open"]) == []
    adapter.delete_all()
    assert adapter.list() == []


def test_failure_memories_live_and_resolve_in_mem0(tmp_path: Path, mem0_server: Mem0Server) -> None:  # noqa: F811
    root = make(tmp_path)
    http = {"user_id": "lifecycle-test", "timeout": 30.0}
    seed_others(HTTPMemoryAdapter(HTTPMemoryConfig(base_url=mem0_server.url, **http)))
    settings = load_settings(root, memory_url=mem0_server.url, memory_http=http)
    adapter = injection.open_adapter(settings)
    for _ in range(3):
        run_suite("decisions", settings=settings)
    (root / "BROKEN").write_text("")
    broken = run_suite("decisions", settings=settings)
    assert broken.extras["memories"][0]["action"] == "opened", broken.notices
    (memory,) = learning.incidents(adapter, "decisions")
    assert memory.metadata["eval_run_id"] == broken.executed.run.id
    assert 'expected: {"action": "UPDATE"}' in memory.information

    again = run_suite("decisions", settings=load_settings(root, memory_url=mem0_server.url, memory_http=http,
                                                          inject_failures=False))
    assert again.extras["memories"][0]["action"] == "updated"
    (same,) = learning.incidents(adapter, "decisions")                 # still exactly one
    assert same.id == memory.id and same.metadata["runs_seen"] == 2

    healed = run_suite("decisions", settings=settings)                 # injected from mem0
    assert healed.executed.summaries["similarity-detection"].mean == 1.0
    assert healed.extras["memories"][0]["action"] == "held"            # the lesson holds the broken product
    (held,) = learning.incidents(adapter, "decisions")                 # still injected, tagged status:held
    assert held.id == memory.id and "status:held" in held.tags
    (root / "BROKEN").unlink()
    fixed = run_suite("decisions", settings=settings)                  # the ablation passes without it
    assert fixed.extras["ablation"]["memories"][0]["action"] == "resolved"
    assert learning.incidents(adapter, "decisions") == []
    (resolved,) = learning.incidents(adapter, "decisions", status="resolved")
    assert resolved.id == memory.id
    assert len(learning.incidents(adapter, "regression")) == 1          # other suites untouched

    (root / "evalloop.toml").write_text(f'memory_url = "{mem0_server.url}"\n[memory_http]\n'
                                        'user_id = "lifecycle-test"\ntimeout = 30\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVALLOOP_")}
    listed = subprocess.run([str(Path(sys.executable).parent / "evalloop"), "memories", "list", "--tag",
                             "suite:decisions", "--json"], cwd=root, env={**env, "NO_COLOR": "1"},
                            capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr                     # GET /memories, not refused
    (row,) = json.loads(listed.stdout)
    assert row["id"] == memory.id and "status:resolved" in row["tags"]
    adapter.close()


def test_a_shipped_retrieval_suite_benchmarks_mem0_by_config(tmp_path: Path, mem0_server: Mem0Server,  # noqa: F811
                                                             monkeypatch) -> None:
    monkeypatch.setenv("EVALLOOP_MEM0_URL", mem0_server.url)
    exe = str(Path(sys.executable).parent / "evalloop")
    done = subprocess.run([exe, "compare-targets", "-s", "retrieval-memory", "-t", "memory", "-t", "mem0",
                           "--json"], cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "EVALLOOP_MEM0_URL": mem0_server.url})
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    memory, mem0 = result["results"]
    assert mem0["target"] == "mem0" and mem0["stats"]["n_docs"] == 246
    assert mem0["means"]["recall@10"] > 0.3, mem0["means"]


def test_the_mem0_retriever_cleans_up_its_scope(mem0_server: Mem0Server) -> None:  # noqa: F811
    from evalloop.retrieval.mem0 import Mem0Retriever
    from evalloop.retrieval.types import Doc

    retriever = Mem0Retriever(url=mem0_server.url)
    retriever.build_index([Doc(id=1, content="The deploy runs on Fridays"), Doc(id="b", content="Use pnpm")])
    scope = retriever.scope
    assert retriever.retrieve("when does the deploy run", 1) == ["1"]
    stored = httpx.get(f"{mem0_server.url}/memories", params={"user_id": scope}).json()["results"]
    assert sorted(m["metadata"]["doc_id"] for m in stored) == ["1", "b"]
    retriever.build_index([Doc(id=2, content="Postgres pool max is 20")])   # a new scope per build
    assert retriever.scope != scope
    assert httpx.get(f"{mem0_server.url}/memories", params={"user_id": scope}).json()["results"] == []
    second = retriever.scope
    retriever.close()
    assert httpx.get(f"{mem0_server.url}/memories", params={"user_id": second}).json()["results"] == []


def test_learning_store_mem0_in_an_init_project(tmp_path: Path, mem0_server: Mem0Server) -> None:  # noqa: F811
    """`[learning] store = "mem0"` with an agent id: incidents are written into mem0 under the agent's
    scope (where the production agent finds them), a user target's `lessons` and `evalloop.lessons()`
    read them from there, and no held-out case is among them."""
    import evalloop
    from evalloop.learning import lessons as lessons_module
    from evalloop.suites.lookup import find_suite
    from support.cli import cli
    from test_lessons_targets import N, case, fields, init_project, received

    root = init_project(tmp_path / "proj")
    with (root / "evalloop.toml").open("a") as f:
        f.write(f'\n[learning]\nstore = "mem0"\nurl = "{mem0_server.url}"\nagent_id = "support-bot"\n')
    env: dict[str, str] = {}
    for _ in range(3):
        assert cli(root, "run", "-s", "faq", env=env, timeout=300).returncode == 0
    (root / "BROKEN").write_text("")
    broken = cli(root, "run", "-s", "faq", env=env, timeout=300)
    assert "stored failure memory" in broken.stderr, broken.stderr
    received(root)

    scoped = httpx.get(f"{mem0_server.url}/memories", params={"agent_id": "support-bot"}).json()["results"]
    (incident,) = [m for m in scoped if m["metadata"].get("eval_suite") == "faq"]
    assert incident["metadata"]["status"] == "open" and "suite:faq" in incident["metadata"]["tags"]
    assert not (root / "history" / "memory.db").exists()               # nothing in the embedded store

    cli(root, "run", "-s", "faq", env=env, timeout=300)
    text = received(root)[0]["lessons"]
    assert incident["memory"] in text
    lessons_module.clear_cache()
    assert evalloop.lessons("faq", project_dir=root, wait=60) == text
    held = find_suite("faq", root).held_out_ids()
    for c in (case(i) for i in range(N)):
        if c["id"] in held:
            assert not [f for f in fields(c) if f in text], c["id"]
    (root / "evalloop.toml").write_text('[learning]\nstore = "mem0"\nagent_id = "support-bot"\n')
    bad = cli(root, "run", "-s", "faq", env=env, timeout=60)             # no url: one clear line, exit 2
    assert bad.returncode == 2 and "needs the service's url" in bad.stderr, bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
