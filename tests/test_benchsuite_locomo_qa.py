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


JUDGE_SNAPSHOT = "claude-haiku-4-5-20251001"  # the snapshot the judge's replies report


def mem0_judged(prompt: str, ok) -> Reply:
    """mem0's judge: one user message holding the task, a JSON label back."""
    lines = dict(line.split(": ", 1) for line in prompt.splitlines()
                 if line.startswith(("Question: ", "Gold answer: ", "Generated answer: ")))
    label = "CORRECT" if ok(lines["Gold answer"].lower(), lines["Generated answer"].lower()) else "WRONG"
    return Reply.of_text(f'The answer is on topic or not. {{"label": "{label}"}}', input_tokens=300, output_tokens=20,
                         model=JUDGE_SNAPSHOT)


def asked(prompt: str) -> str:
    """The question as asked, without LoCoMo's date hint or its two options."""
    from evalloop.retrieval.locomo_eval import DATE_HINT

    question = prompt.split("Question: ", 1)[1].split("\n", 1)[0]
    return question.split(" Choose the correct answer:")[0].replace(f" {DATE_HINT}", "")


def model(seen: Seen) -> Reply:
    prompt = seen.last_user_text
    if seen.forced_tool:  # the strict J judge
        truth, said = fenced(prompt, "REFERENCE ANSWER").lower(), fenced(prompt, "ASSISTANT ANSWER").lower()
        assert "strict judge" in seen.system_text.lower() and seen.cache_marked  # its prompt file: the cached prefix
        ok = truth in said or said in truth or truth.split()[0] in said
        return Reply.of_tool({"reason": "scripted", "label": "CORRECT" if ok else "WRONG"},
                             input_tokens=120, output_tokens=20, model=JUDGE_SNAPSHOT)
    if "Gold answer: " in prompt:  # mem0's judge: the same topic is enough
        assert not seen.system_text and "touches on the same topic" in prompt
        return mem0_judged(prompt, lambda gold, said: any(w in said for w in gold.replace(";", " ").split()))
    question = asked(prompt)
    answer, needs = ANSWERS[question]
    memories = fenced(prompt, "MEMORIES")
    if "Choose the correct answer: (a) Not mentioned" in prompt:  # LoCoMo's two-way category-5 question
        return Reply.of_text("(a)" if needs not in memories else "(b)", input_tokens=100, output_tokens=3)
    if "Choose the correct answer:" in prompt:
        return Reply.of_text("b" if needs not in memories else "a", input_tokens=100, output_tokens=3)
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
        assert run.returncode == 0, run.stderr  # a benchmark measures: no default floor fails it
        assert server.count == 6 + 5 + 5  # six answers, five judged by each judge (the adversarial one by none)
        text = cli(imported, "run", "--suite", "locomo-qa", "--no-cache", env=_env(server))
    doc = json.loads(run.stdout)
    means = {s["scorer"]: s["current"] for s in doc["scorers"]}
    # strict J over the five non-adversarial: guitar, Pepper, Kiel right; the date and "Bob" wrong
    assert means["j-strict"] == pytest.approx(3 / 5)
    # mem0's judge takes the same topic: "8 May 2023" touches "May 2023"; "Bob" is still off topic
    assert means["j-mem0"] == pytest.approx(4 / 5)
    assert means["abstention"] == 1.0 and means["locomo-adversarial"] == 1.0  # the dog: "(a)", not mentioned
    assert 0 < means["locomo-f1"] < 1 and 0 < means["bleu-1"] < 1 and 0 < means["evalloop-f1"] < 1
    strata = {r["tag"]: r["means"] for r in doc["strata"]["strata"]}
    assert strata["4 single-hop / mem0 open-domain"]["j-strict"] == 1.0  # guitar, Kiel
    assert strata["3 open-domain / mem0 multi-hop"]["j-strict"] == 0.0
    assert "abstention" not in {k for k, v in strata["4 single-hop / mem0 open-domain"].items() if v is not None}
    stats = doc["target_stats"]
    assert stats["n_queries"] == 6 and stats["search_p95_ms"] >= stats["search_p50_ms"] > 0
    assert stats["total_p50_ms"] >= stats["search_p50_ms"] and stats["tokens_per_question"] > 100
    per = stats["per_category"]
    assert per["4 single-hop / mem0 open-domain"]["n"] == 2 and per["5 adversarial"]["tokens_per_question"] == 103
    assert per["2 temporal"]["total_p95_ms"] >= per["2 temporal"]["total_p50_ms"] > 0
    assert stats["memories_per_scope"] == 4 and stats["memory_tokens"] > 0  # 5 and 3 turns, as stored
    card = stats["card"]
    assert card["protocol"] == "locomo" and card["answerer"]["snapshots"] == ["claude-haiku-4-5"]
    assert card["judge"] == {"model": "claude-haiku-4-5", "snapshots": [JUDGE_SNAPSHOT]}  # both judges
    assert card["split"] == {"questions": 6, "conversations": 2, "of_conversations": 2}
    assert card["dataset"]["sha256"] and card["embedder"] is None  # bm25 embeds nothing
    assert "1 multi-hop / mem0 single-hop" in text.stdout and "tokens_per_question" in text.stdout
    assert "benchmark card: protocol locomo" in " ".join(text.stdout.split())


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
    assert rows["full-context"]["means"]["j-strict"] == pytest.approx(3 / 5)  # every turn is shown
    assert rows["myretriever:Newest"]["stats"]["n_queries"] == 6
    assert rows["full-context"]["stats"]["tokens_per_question"] > rows["bm25"]["stats"]["tokens_per_question"]


def test_without_an_answer_model_the_local_engine_answers_with_the_best_memory(imported):
    offline = {"ANTHROPIC_API_KEY": "", "ANTHROPIC_BASE_URL": ""}
    run = cli(imported, "run", "--suite", "locomo-qa", "--json", env=offline)
    assert run.returncode in (0, 1), run.stderr
    doc = json.loads(run.stdout)
    summaries = {s["scorer"]: s for s in doc["scorers"]}
    assert summaries["j-strict"]["n"] == 0 and summaries["j-mem0"]["n"] == 0  # no judge: skipped, never guessed
    assert 0 < summaries["locomo-f1"]["current"] < 1  # "guitar" is in the best memory's text
    assert any("no ANTHROPIC_API_KEY" in n for n in doc.get("notices", [])) or "no ANTHROPIC_API_KEY" in run.stderr
    forced = cli(imported, "run", "--suite", "locomo-qa", "--engine", "llm", env=offline)
    assert forced.returncode == 2 and "needs an LLM" in forced.stderr


def test_the_local_answer_is_the_best_memory_without_its_date_and_speaker():
    from evalloop.retrieval.answer_target import local_answer

    assert local_answer(["[1:56 pm on 8 May, 2023] Bob: I started guitar lessons."]) == "I started guitar lessons."
    assert local_answer(["Bob: Kiel."]) == "Kiel."
    assert local_answer([]) == "No information available."


def test_compare_targets_prints_intervals_latency_tokens_memory_and_the_std_over_epochs(imported):
    with LLMServer(model) as server:
        done = cli(imported, "compare-targets", "-s", "locomo-qa", "-t", "full-context", "-t", "bm25",
                   "--epochs", "2", env={**_env(server), "COLUMNS": "160"})
        assert done.returncode == 0, done.stderr
        data = cli(imported, "compare-targets", "-s", "locomo-qa", "-t", "bm25", "--epochs", "2", "--json",
                   env=_env(server))
    lines = done.stdout.splitlines()
    heads = [line for line in lines if line.startswith("target")]
    assert all(col in heads[1] for col in ("search p50", "total p95", "tokens/q", "cost $", "memory tok/conv"))
    bm25 = [line for line in lines if line.startswith("bm25")][0]
    assert "0.600 ± 0.000" in bm25  # strict J: the mean over 2 epochs ± their standard deviation
    assert re.search(r"\[\d\.\d\d–\d\.\d\d\]", done.stdout)  # each mean's 95% interval, in the text table
    assert "whole conversations resampled" in done.stdout and "over 2 epochs" in done.stdout
    assert "bm25 benchmark card: protocol locomo" in " ".join(done.stdout.split())
    (row,) = json.loads(data.stdout)["results"]
    assert row["spread"]["j-strict"] == [pytest.approx(0.6), 0.0, 2]
    assert row["stats"]["card"]["split"]["questions"] == 6  # six questions, each asked twice


def test_evalloop_f1_normalises_and_splits_multi_hop_answers():
    from evalloop.retrieval.answers import abstains, evalloop_f1, normalise_answer

    assert normalise_answer("The Guitars, running!") == ["guitar", "run"]
    assert evalloop_f1("guitars", "the guitar") == 1.0
    assert evalloop_f1("Pepper, coffee", "coffee, Pepper", category=1) == 1.0
    assert evalloop_f1("Pepper", "Pepper, coffee", category=1) == 0.5  # one of two parts
    assert evalloop_f1("Kiel", "Kiel; the Baltic", category=3) == 1.0  # open-domain: before the ';'
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
        if "Gold answer: " in prompt:
            return mem0_judged(prompt, lambda gold, said: gold == said)
        asked.append(prompt)
        return Reply.of_text(said[prompt.split("Question: ", 1)[1].split("\n", 1)[0]])

    with LLMServer(lme) as server:
        run = cli(tmp_path, "run", "--suite", "longmemeval-qa", "--json", "--no-cache", env=_env(server))
    assert run.returncode in (0, 1), run.stderr
    doc = json.loads(run.stdout)
    means = {s["scorer"]: s["current"] for s in doc["scorers"]}
    assert means["j-strict"] == pytest.approx(2 / 3) and means["abstention"] == 1.0
    assert any("asked on 2023/05/30" in p for p in asked)  # the question's own date
    # only LoCoMo asks its category 5 as a choice offering the trap; a LongMemEval input never
    # carries an abstention question's answer (any target could read it)
    from evalloop.retrieval.dataset_cases import dataset_cases

    inputs = {c.id: c.input for c in dataset_cases(tmp_path / "fixtures" / "longmemeval-qa")}
    assert "choice" not in inputs["q3_abs"] and inputs["q3_abs"]["question"] == "What is my cat's name?"
    # q3_abs is an abstention question, grouped as one, not under its question type
    strata = {r["tag"]: r for r in doc["strata"]["strata"]}
    assert strata["abstention"]["n"] == 1 and strata["abstention"]["means"]["abstention"] == 1.0
    assert strata["single-session-user"]["n"] == 1


def test_limit_samples_whole_conversations_at_random_not_the_first_questions(tmp_path):
    from evalloop.retrieval.card import sample_scopes
    from evalloop.retrieval.suite_compare import case_scopes
    from evalloop.suites.lookup import find_suite

    done = cli(tmp_path, "compare-targets", "-s", "retrieval-conversations", "-t", "bm25", "--limit", "30",
               "--seed", "3", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    scopes = case_scopes(find_suite("retrieval-conversations", tmp_path))
    sizes = {s: list(scopes.values()).count(s) for s in set(scopes.values())}
    chosen = sample_scopes(scopes, 30, 3)
    assert result["n_cases"] == sum(sizes[s] for s in chosen) >= 30  # whole conversations, at least 30 cases
    first = list(dict.fromkeys(scopes.values()))[:2]
    assert chosen != set(first) and "seed 3" in result["sample"]  # not the first two conversations
    asked = {r["tag"] for r in result["results"][0]["strata"]["scopes"]}
    assert asked == chosen
    assert sample_scopes(scopes, 30, 3) == chosen and sample_scopes(scopes, 30, 4) != chosen  # seeded
