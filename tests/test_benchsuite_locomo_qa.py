"""The LoCoMo QA suite end to end, as the published tables score it: each question retrieves
from its own conversation, the answer model (the loopback Messages server, through the real
anthropic SDK) answers from what was retrieved, the J judge grades CORRECT/WRONG, LoCoMo's token
F1 is computed, and adversarial questions are graded by abstention only, never in J."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from support.cli import cli
from support.messages_server import LLMServer, Reply, Seen
from test_benchsuite_import import LOCOMO

# question -> (the answer a model gives when the memory holding `needs` was retrieved)
ANSWERS = {
    "What instrument is Bob learning?": ("guitar lessons", "guitar"),
    "What is the cat called and what did it do?": ("Pepper, knocked coffee over", "Pepper"),
    "When did Alice adopt the cat?": ("8 May 2023", "Pepper"),
    "Where does Bob's dog sleep?": ("on the sofa", "dog"),  # adversarial: the trap, if it ever answers
    "Where is Dana learning to sail?": ("Kiel", "Kiel"),
    "Who keeps talking about the guitar instrument?": ("Bob", "guitar"),  # wrong: it is Chen
}


def fenced(text: str, name: str) -> str:
    match = re.search(rf"<<<{name} \w+>>>\n(.*?)\n<<<END {name} \w+>>>", text, re.S)
    assert match, f"no {name} fence in {text[:200]!r}"
    return match.group(1)


def model(seen: Seen) -> Reply:
    prompt = seen.last_user_text
    if seen.forced_tool:  # the J judge
        truth, said = fenced(prompt, "REFERENCE ANSWER").lower(), fenced(prompt, "ASSISTANT ANSWER").lower()
        assert "generous" in seen.system_text.lower() and seen.cache_marked  # its prompt file: the cached prefix
        ok = truth in said or said in truth or truth.split()[0] in said
        return Reply.of_tool({"reason": "scripted", "label": "CORRECT" if ok else "WRONG"},
                             input_tokens=120, output_tokens=20)
    question = prompt.split("Question: ", 1)[1].split("\n", 1)[0]
    answer, needs = ANSWERS[question]
    memories = fenced(prompt, "MEMORIES")
    said = answer if needs in memories else "No information available."
    return Reply.of_text(said, input_tokens=100 + len(memories) // 4, output_tokens=8)


@pytest.fixture
def imported(tmp_path: Path) -> Path:
    source = tmp_path / "locomo10.json"
    source.write_text(json.dumps(LOCOMO), encoding="utf-8")
    made = cli(tmp_path, "bench", "import", "locomo", str(source))
    assert made.returncode == 0, made.stderr
    assert "locomo-qa.yaml (6 questions)" in " ".join(made.stdout.split())
    return tmp_path


def _env(server: LLMServer) -> dict[str, str]:
    return {"ANTHROPIC_API_KEY": "test", "ANTHROPIC_BASE_URL": server.url}


def test_the_qa_suite_answers_judges_and_reports_per_category_latency_and_tokens(imported):
    with LLMServer(model) as server:
        run = cli(imported, "run", "--suite", "locomo-qa", "--json", "--no-cache", env=_env(server))
        assert run.returncode in (0, 1), run.stderr
        assert server.count == 6 + 5  # six answers, five judged (the adversarial one is not)
        text = cli(imported, "run", "--suite", "locomo-qa", "--no-cache", env=_env(server))
    doc = json.loads(run.stdout)
    means = {s["scorer"]: s["current"] for s in doc["scorers"]}
    # J over the five non-adversarial: guitar, Pepper, Kiel right; the date and "Bob" wrong
    assert means["j-judge"] == pytest.approx(3 / 5)
    assert means["abstention"] == 1.0  # the dog question: "No information available."
    assert 0 < means["locomo-f1"] < 1
    strata = {r["tag"]: r["means"] for r in doc["strata"]["strata"]}
    assert strata["4 single-hop / mem0 open-domain"]["j-judge"] == 1.0  # guitar, Kiel
    assert strata["3 open-domain / mem0 multi-hop"]["j-judge"] == 0.0
    assert "abstention" not in {k for k, v in strata["4 single-hop / mem0 open-domain"].items() if v is not None}
    stats = doc["target_stats"]
    assert stats["n_queries"] == 6 and stats["search_p95_ms"] >= stats["search_p50_ms"] > 0
    assert stats["total_p50_ms"] >= stats["search_p50_ms"] and stats["tokens_per_question"] > 100
    assert "1 multi-hop / mem0 single-hop" in text.stdout and "tokens_per_question" in text.stdout


USER_RETRIEVER = (
    "class Newest:\n"
    "    # the user's own retriever: the newest k turns, whatever the question\n"
    "    def build_index(self, corpus):\n"
    "        self.ids = [d.key for d in corpus]\n\n"
    "    def retrieve(self, query, k):\n"
    "        return self.ids[::-1][:k]\n")


def test_full_context_is_the_reference_row_beside_any_retriever(imported):
    (imported / "myretriever.py").write_text(USER_RETRIEVER, encoding="utf-8")
    with LLMServer(model) as server:
        done = cli(imported, "compare-targets", "-s", "locomo-qa", "-t", "full-context", "-t", "bm25",
                   "-t", "memory", "-t", "myretriever:Newest", "--json", env=_env(server))
        assert done.returncode == 0, done.stderr
    rows = {r["target"]: r for r in json.loads(done.stdout)["results"]}
    assert rows["full-context"]["means"]["j-judge"] == pytest.approx(3 / 5)  # every turn is shown
    assert rows["myretriever:Newest"]["stats"]["n_queries"] == 6
    assert rows["full-context"]["stats"]["tokens_per_question"] > rows["bm25"]["stats"]["tokens_per_question"]


def test_without_an_answer_model_the_local_engine_answers_with_the_best_memory(imported):
    offline = {"ANTHROPIC_API_KEY": "", "ANTHROPIC_BASE_URL": ""}
    run = cli(imported, "run", "--suite", "locomo-qa", "--json", env=offline)
    assert run.returncode in (0, 1), run.stderr
    doc = json.loads(run.stdout)
    summaries = {s["scorer"]: s for s in doc["scorers"]}
    assert summaries["j-judge"]["n"] == 0  # no judge: skipped, never guessed
    assert 0 < summaries["locomo-f1"]["current"] < 1  # "guitar" is in the best memory's text
    assert any("no ANTHROPIC_API_KEY" in n for n in doc.get("notices", [])) or "no ANTHROPIC_API_KEY" in run.stderr
    forced = cli(imported, "run", "--suite", "locomo-qa", "--engine", "llm", env=offline)
    assert forced.returncode == 2 and "needs an LLM" in forced.stderr


def test_the_local_answer_is_the_best_memory_without_its_date_and_speaker():
    from evalloop.retrieval.answer_target import local_answer

    assert local_answer(["[1:56 pm on 8 May, 2023] Bob: I started guitar lessons."]) == "I started guitar lessons."
    assert local_answer(["Bob: Kiel."]) == "Kiel."
    assert local_answer([]) == "No information available."


def test_compare_targets_prints_search_and_total_latency_and_tokens_for_a_qa_suite(imported):
    with LLMServer(model) as server:
        done = cli(imported, "compare-targets", "-s", "locomo-qa", "-t", "full-context", "-t", "bm25",
                   env={**_env(server), "COLUMNS": "160"})
    assert done.returncode == 0, done.stderr
    head = next(line for line in done.stdout.splitlines() if line.startswith("target"))
    assert all(col in head for col in ("search p50", "total p95", "tokens/q", "cost $"))


def test_locomo_f1_normalises_and_splits_multi_hop_answers():
    from evalloop.retrieval.answers import abstains, locomo_f1, normalise_answer

    assert normalise_answer("The Guitars, running!") == ["guitar", "run"]
    assert locomo_f1("guitars", "the guitar") == 1.0
    assert locomo_f1("Pepper, coffee", "coffee, Pepper", category=1) == 1.0
    assert locomo_f1("Pepper", "Pepper, coffee", category=1) == 0.5  # one of two parts
    assert locomo_f1("Kiel", "Kiel; the Baltic", category=3) == 1.0  # open-domain: before the ';'
    assert abstains("No information available.") and not abstains("On the sofa")


def test_longmemeval_gets_the_same_qa_suite_with_its_abstention_questions(tmp_path):
    from test_benchsuite_import import LONGMEMEVAL

    source = tmp_path / "longmemeval_s.json"
    source.write_text(json.dumps(LONGMEMEVAL), encoding="utf-8")
    made = cli(tmp_path, "bench", "import", "longmemeval", str(source))
    assert made.returncode == 0, made.stderr
    said = {"What degree did I graduate with?": "Business Administration",
            "Which city did I move to first?": "Bergen", "What is my cat's name?": "You never mentioned a cat.",
            "How many bikes do I own?": "3"}
    asked: list[str] = []

    def lme(seen: Seen) -> Reply:
        prompt = seen.last_user_text
        if seen.forced_tool:
            truth, answer = fenced(prompt, "REFERENCE ANSWER"), fenced(prompt, "ASSISTANT ANSWER")
            return Reply.of_tool({"reason": "scripted", "label": "CORRECT" if truth == answer else "WRONG"})
        asked.append(prompt)
        return Reply.of_text(said[prompt.split("Question: ", 1)[1].split("\n", 1)[0]])

    with LLMServer(lme) as server:
        run = cli(tmp_path, "run", "--suite", "longmemeval-qa", "--json", "--no-cache", env=_env(server))
    assert run.returncode in (0, 1), run.stderr
    means = {s["scorer"]: s["current"] for s in json.loads(run.stdout)["scorers"]}
    assert means["j-judge"] == pytest.approx(2 / 3) and means["abstention"] == 1.0
    assert any("asked on 2023/05/30" in p for p in asked)  # the question's own date
