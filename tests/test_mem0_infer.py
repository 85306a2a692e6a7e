"""mem0 with its LLM extraction as the memory under test (``retriever: mem0-infer``): a real
in-process ``mem0.Memory`` (mem0ai, local Qdrant) whose extraction calls go through evalloop's LLM
client to the loopback Messages server, so the answer model is shown mem0's extracted facts, not
the conversation's turns, and the run counts what extraction spent and how much memory it kept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.cli import cli
from support.mem0_server import needs_mem0
from support.messages_server import LLMServer, Reply, Seen
from test_benchsuite_locomo_qa import _env, fenced, imported, model  # noqa: F401

pytestmark = needs_mem0


def extracting(seen: Seen, shown: list[str], extracted: list[str]) -> Reply:
    """mem0's extraction: one fact per new message, marked so the answer's memories show it;
    everything else (answers, judges) as the QA suite's scripted model."""
    prompt = seen.last_user_text
    if "## New Messages" in prompt:
        said = prompt.split("## New Messages\n", 1)[1].split("\n## ", 1)[0].strip()
        said = said.removeprefix("user: ").strip()
        extracted.append(said)
        fact = json.dumps({"memory": [{"text": f"FACT {said}"}]})
        return Reply.of_text(fact, input_tokens=500, output_tokens=40)
    if "<<<MEMORIES" in prompt:
        shown.append(fenced(prompt, "MEMORIES"))
    return model(seen)


def test_mem0_with_extraction_answers_from_its_facts_and_counts_what_extraction_spent(imported: Path):  # noqa: F811
    shown: list[str] = []
    extracted: list[str] = []
    with LLMServer(lambda seen: extracting(seen, shown, extracted)) as server:
        done = cli(imported, "compare-targets", "-s", "locomo-qa", "-t", "bm25", "-t", "mem0-infer", "--json",
                   env=_env(server), timeout=600)
    assert done.returncode == 0, done.stderr
    rows = {r["target"]: r for r in json.loads(done.stdout)["results"]}
    assert len(extracted) == 8  # one extraction call per turn: 5 + 3 turns in two conversations
    assert any("I am learning to sail in Kiel." in e for e in extracted)
    assert shown and all(line.startswith("- FACT ") for block in shown[-6:] for line in block.splitlines())
    stats = rows["mem0-infer"]["stats"]
    assert stats["extraction_calls"] == 8 and stats["extraction_tokens_in"] == 8 * 500
    assert stats["memories_per_scope"] == 4  # the facts it kept, one per turn
    assert stats["memory_tokens"] > rows["bm25"]["stats"]["memory_tokens"]  # each fact is "FACT " + the turn
    assert stats["card"]["retriever"] == "mem0-infer" and stats["card"]["embedder"]["dim"] > 0
    # shown every fact of its conversation, the scripted answers are those of bm25's turns
    assert rows["mem0-infer"]["means"]["j-strict"] == pytest.approx(rows["bm25"]["means"]["j-strict"])


def test_mem0_with_extraction_and_no_llm_stops_with_one_clear_line(imported: Path):  # noqa: F811
    done = cli(imported, "compare-targets", "-s", "locomo-qa", "-t", "mem0-infer", env={"ANTHROPIC_API_KEY": ""})
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "mem0-infer extracts facts with an LLM, and none is configured" in done.stderr, done.stderr


def test_the_retriever_maps_facts_to_their_turns_and_ends_its_llm_loop_with_the_build(monkeypatch):
    import threading

    from evalloop.retrieval.mem0_infer import Mem0InferRetriever
    from evalloop.retrieval.types import Doc

    def facts(seen: Seen) -> Reply:
        said = seen.last_user_text.split("## New Messages\n", 1)[1].split("\n## ", 1)[0]
        return Reply.of_text(json.dumps({"memory": [{"text": f"FACT {said.removeprefix('user: ').strip()}"}]}))

    with LLMServer(facts) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        retriever = Mem0InferRetriever()
        retriever.build_index([Doc(id="d1", content="The deploy runs on Fridays"),
                               Doc(id="d2", content="Postgres pool max is 20")])
        assert server.count == 2
    assert not [t for t in threading.enumerate() if t.name == "evalloop-mem0-llm"]  # closed with the build
    assert retriever.retrieve("when does the deploy run", 1) == ["d1"]  # the fact carries its turn's id
    assert retriever.search_texts("postgres pool", 1) == ["FACT Postgres pool max is 20"]
    assert sorted(retriever.memory_texts()) == ["FACT Postgres pool max is 20", "FACT The deploy runs on Fridays"]
    assert retriever.build_stats()["extraction_calls"] == 2
    retriever.close()
    assert retriever.memory_texts() == []


def test_documents_added_in_batches_give_each_fact_the_ids_of_its_batch(monkeypatch):
    from evalloop.retrieval.mem0_infer import Mem0InferRetriever
    from evalloop.retrieval.types import Doc

    asked: list[str] = []

    def one_fact(seen: Seen) -> Reply:
        asked.append(seen.last_user_text)
        return Reply.of_text(json.dumps({"memory": [{"text": "Alice's cat Pepper knocked the coffee over"}]}))

    docs = [Doc(id=f"d{i}", content=text) for i, text in enumerate(
        ["Alice: I adopted a cat called Pepper.", "Bob: Pepper knocked my coffee over.", "Alice: Sorry!"])]
    with LLMServer(one_fact) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        retriever = Mem0InferRetriever(batch=2, instructions="Name the person in every memory.")
        retriever.build_index(docs)
    assert len(asked) == 2  # three turns, two at a time
    assert "I adopted a cat called Pepper." in asked[0] and "knocked my coffee over" in asked[0]
    assert "Name the person in every memory." in asked[0]  # mem0's custom instructions
    assert retriever.retrieve("what did the cat do", 5) == ["d0", "d1"]  # mem0 kept one fact: the first batch's
    retriever.close()


def test_compare_targets_prints_what_building_the_memory_cost():
    from evalloop.cli.benchmarks import _measures

    row = _measures({"total_p50_ms": 3.0, "answer_cost_usd": 0.002, "extraction_cost_usd": 0.0123}, qa=True)
    assert row["build $"] == "0.0123" and row["cost $"] == "0.0020"
    assert _measures({"total_p50_ms": 3.0}, qa=True)["build $"] == "—"  # a retriever that extracts nothing
