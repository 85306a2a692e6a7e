"""LoCoMo and LongMemEval files in their published formats become scoped suites: one index per
conversation, hit@k beside recall@k, per-stratum and per-scope tables, skipped questions counted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalloop.errors import FixtureError
from evalloop.retrieval.loaders import load_locomo, load_longmemeval
from evalloop.retrieval.suite_targets import RetrieverTarget
from support.cli import cli


def turn(speaker: str, dia: str, text: str) -> dict:
    return {"speaker": speaker, "dia_id": dia, "text": text}


LOCOMO = [
    {"sample_id": "conv-a", "conversation": {
        "speaker_a": "Alice", "speaker_b": "Bob",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [turn("Alice", "D1:1", "Hi Bob, long time no see!"),
                      turn("Bob", "D1:2", "I started guitar lessons last week."),
                      turn("Alice", "D1:3", "Nice. I adopted a cat called Pepper.")],
        "session_2_date_time": "3:00 pm on 20 May, 2023",
        "session_2": [{**turn("Bob", "D2:1", "Pepper knocked my coffee over at your place."),
                       "img_url": ["https://example.invalid/p.jpg"], "blip_caption": "a spilled mug on a table"},
                      turn("Alice", "D2:2", "She also likes the balcony in Lisbon.")]},
     "qa": [{"question": "What instrument is Bob learning?", "answer": "guitar",
             "evidence": ["D1:2"], "category": 4},
            {"question": "What is the cat called and what did it do?", "answer": "Pepper; coffee",
             "evidence": ["D1:3; D2:1"], "category": 1},
            {"question": "When did Alice adopt the cat?", "answer": "May 2023", "evidence": [],
             "category": 2},
            {"question": "Where does Bob's dog sleep?", "adversarial_answer": "on the sofa",
             "evidence": ["D9:9"], "category": 5}]},
    {"sample_id": "conv-b", "conversation": {
        "speaker_a": "Chen", "speaker_b": "Dana",
        "session_1_date_time": "9:00 am on 2 June, 2023",
        "session_1": [turn("Chen", "D1:1", "Guitar, guitar, guitar: my instrument is the guitar!"),
                      turn("Dana", "D1:2", "I am learning to sail in Kiel."),
                      turn("Chen", "D1:3", "Bob told me about his guitar instrument too.")]},
     "qa": [{"question": "Where is Dana learning to sail?", "answer": "Kiel", "evidence": ["D1:2"],
             "category": 4},
            {"question": "Who keeps talking about the guitar instrument?", "answer": "Chen",
             "evidence": ["D1:1"], "category": 3}]},
]


def session(*turns: tuple[str, str, bool]) -> list[dict]:
    return [{"role": r, "content": c, **({"has_answer": True} if a else {})} for r, c, a in turns]


LONGMEMEVAL = [
    {"question_id": "q1", "question_type": "single-session-user", "question": "What degree did I graduate with?",
     "answer": "Business Administration", "question_date": "2023/05/30",
     "haystack_dates": ["2023/05/20", "2023/05/21"], "haystack_session_ids": ["s1", "s2"],
     "haystack_sessions": [session(("user", "I graduated with a degree in Business Administration.", True),
                                   ("assistant", "Congratulations on your degree!", False)),
                           session(("user", "Any tips for growing tomatoes?", False))],
     "answer_session_ids": ["s1"]},
    {"question_id": "q2", "question_type": "temporal-reasoning", "question": "Which city did I move to first?",
     "answer": "Oslo", "haystack_session_ids": ["s1", "s3"],
     "haystack_sessions": [session(("user", "I graduated with a degree in chemistry.", False)),
                           session(("user", "I moved to Oslo, then to Bergen.", True))],
     "answer_session_ids": ["s3"]},
    {"question_id": "q3_abs", "question_type": "single-session-user", "question": "What is my cat's name?",
     "answer": "You did not mention a cat.", "haystack_session_ids": ["s4"],
     "haystack_sessions": [session(("user", "I like dogs.", False))], "answer_session_ids": []},
    {"question_id": "q4", "question_type": "multi-session", "question": "How many bikes do I own?",
     "answer": "3", "haystack_session_ids": ["s5"],
     "haystack_sessions": [session(("user", "I ride a lot.", False))], "answer_session_ids": ["s9"]},
]


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    locomo, lme = tmp_path / "locomo10.json", tmp_path / "longmemeval_s.json"
    locomo.write_text(json.dumps(LOCOMO), encoding="utf-8")
    lme.write_text(json.dumps(LONGMEMEVAL), encoding="utf-8")
    return locomo, lme


def test_locomo_turns_become_scoped_documents_and_evidence_the_qrels(files):
    dataset, report = load_locomo(files[0])
    assert report.n_docs == 8 and report.n_scopes == 2 and report.n_queries == 4
    assert report.skipped == {"no evidence": 1,
                              "adversarial (category 5: scored as abstention in the QA suite)": 1}
    doc = dataset.doc_map()["conv-a:D1:2"]
    assert doc.scope == "conv-a" and doc.content == "[1:56 pm on 8 May, 2023] Bob: I started guitar lessons last week."
    assert doc.field("date_time") == "1:56 pm on 8 May, 2023" and doc.field("session") == 1
    shared = dataset.doc_map()["conv-a:D2:1"].content
    assert shared == ("[3:00 pm on 20 May, 2023] Bob: Pepper knocked my coffee over at your place. "
                      "[shares a spilled mug on a table]")
    queries = {q.query_id: q for q in dataset.queries}
    assert queries["conv-a:q1"].stratum == "4 single-hop / mem0 open-domain"
    assert queries["conv-b:q2"].stratum == "3 open-domain / mem0 multi-hop"
    assert dataset.qrels["conv-a:q2"] == {"conv-a:D1:3": 1, "conv-a:D2:1": 1}  # "D1:3; D2:1" split
    assert queries["conv-a:q2"].scope == "conv-a" and queries["conv-a:q2"].model_extra["answer"] == "Pepper; coffee"


def test_longmemeval_per_question_haystacks_by_session_or_turn(files):
    dataset, report = load_longmemeval(files[1])
    assert report.n_scopes == 2 and report.n_queries == 2 and report.n_docs == 4  # q3_abs, q4 skipped
    assert report.skipped == {"abstention question (no evidence by design)": 1, "no evidence in the haystack": 1}
    assert dataset.qrels == {"q1": {"q1:s1": 1}, "q2": {"q2:s3": 1}}
    assert {d.key for d in dataset.corpus if d.scope == "q2"} == {"q2:s1", "q2:s3"}  # s1 again, own copy
    assert dataset.doc_map()["q1:s2"].field("date_time") == "2023/05/21"
    turns, _ = load_longmemeval(files[1], granularity="turn")
    assert turns.qrels["q1"] == {"q1:s1:0": 1} and len(turns.corpus) == 5


def test_a_query_searches_only_its_own_conversation(files, tmp_path):
    folder = tmp_path / "fixtures" / "locomo"
    made = cli(tmp_path, "bench", "import", "locomo", str(files[0]), "--out", str(folder))
    assert made.returncode == 0, made.stderr
    assert ("skipped: 1 no evidence, 1 adversarial (category 5: scored as abstention in the QA suite)"
            in " ".join(made.stdout.split()))
    target = RetrieverTarget(retriever="bm25", k=5, dataset=str(folder))
    # conv-b's first turn is the stronger "guitar instrument" match; conv-a's query never sees it
    ids = target({"query": "What instrument is Bob learning? guitar", "scope": "conv-a"})
    assert ids[0] == "conv-a:D1:2" and all(i.startswith("conv-a:") for i in ids)
    assert target.run_stats()["n_scopes"] == 2
    unscoped = RetrieverTarget(retriever="bm25", k=5, dataset=str(folder))
    with pytest.raises(Exception, match="has no scope"):
        unscoped({"query": "guitar"})


@pytest.mark.parametrize("fmt", ["locomo", "longmemeval"])
def test_each_import_runs_as_one_suite_with_hit_and_recall_per_stratum_and_scope(files, tmp_path, fmt):
    source = files[0] if fmt == "locomo" else files[1]
    made = cli(tmp_path, "bench", "import", fmt, str(source))
    assert made.returncode == 0, made.stderr
    run = cli(tmp_path, "run", "--suite", fmt, "--json")
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    means = {s["scorer"]: s["current"] for s in doc["scorers"]}
    assert list(means) == ["hit@5", "hit@10", "recall@5", "recall@10", "ndcg@10", "mrr@20"]
    assert means["hit@5"] >= means["recall@5"] > 0
    strata = doc["strata"]
    scopes = {row["tag"]: row for row in strata["scopes"]}
    assert set(scopes) == ({"conv-a", "conv-b"} if fmt == "locomo" else {"q1", "q2"})
    assert not any(r["tag"].startswith("scope:") for r in strata["strata"])
    assert sum(r["n"] for r in scopes.values()) == doc["n_cases"]
    text = cli(tmp_path, "run", "--suite", fmt)
    assert text.returncode == 0 and "per scope" in text.stdout and "per stratum" in text.stdout


def test_locomo_per_scope_means_are_the_conversations_own(files, tmp_path):
    assert cli(tmp_path, "bench", "import", "locomo", str(files[0])).returncode == 0
    doc = json.loads(cli(tmp_path, "run", "--suite", "locomo", "--json").stdout)
    scopes = {row["tag"]: row["means"] for row in doc["strata"]["scopes"]}
    assert scopes["conv-b"]["hit@5"] == 1.0  # two questions, each finds its turn in a 3-turn corpus
    multi = next(r["means"] for r in doc["strata"]["strata"] if r["tag"] == "1 multi-hop / mem0 single-hop")
    assert (multi["hit@5"], multi["recall@5"]) == (1.0, 0.5)  # one of two evidence turns found
    macro = doc["strata"]["scope_macro"]["recall@5"]
    assert macro == pytest.approx((scopes["conv-a"]["recall@5"] + scopes["conv-b"]["recall@5"]) / 2)


def test_bad_files_end_in_one_line(tmp_path, files):
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"not": "a list"}), encoding="utf-8")
    bad = cli(tmp_path, "bench", "import", "locomo", str(wrong))
    assert bad.returncode == 2 and "expected a JSON list of LoCoMo items" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) <= 2
    missing = tmp_path / "missing.json"
    missing.write_text(json.dumps([{"question_id": "x", "question": "?"}]), encoding="utf-8")
    bad = cli(tmp_path, "bench", "import", "longmemeval", str(missing))
    assert bad.returncode == 2 and "haystack_session_ids" in bad.stderr
    assert cli(tmp_path, "bench", "import", "locomo", str(files[0])).returncode == 0
    again = cli(tmp_path, "bench", "import", "locomo", str(files[0]))
    assert again.returncode == 2 and "already exist" in again.stderr


def test_a_query_judged_against_another_scope_is_refused(tmp_path):
    from evalloop.retrieval.dataset import load_dataset

    (tmp_path / "corpus.jsonl").write_text(
        '{"id": "a1", "content": "x", "scope": "a"}\n{"id": "b1", "content": "y", "scope": "b"}\n')
    (tmp_path / "queries.jsonl").write_text('{"query_id": "q", "text": "x", "stratum": "s", "scope": "a"}\n')
    (tmp_path / "qrels.jsonl").write_text('{"query_id": "q", "relevant_ids": ["b1"]}\n')
    with pytest.raises(FixtureError, match="judges doc 'b1' of scope 'b'"):
        load_dataset(tmp_path)
    (tmp_path / "queries.jsonl").write_text('{"query_id": "q", "text": "x", "stratum": "s"}\n')
    with pytest.raises(FixtureError, match="query 'q' has no 'scope'"):
        load_dataset(tmp_path)


def test_a_long_scope_table_shows_the_lowest_scopes_and_says_so():
    from rich.console import Console

    from evalloop.report.strata import MAX_SCOPE_ROWS, StrataReport, StratumRow, strata_table

    rows = [StratumRow(tag=f"q{i}", n=1, means={"hit@5": 1.0 if i % 2 else 0.0}) for i in range(50)]
    report = StrataReport(run_id="r", scorers=["hit@5"], n=50, overall={"hit@5": 0.5}, macro={},
                          strata=[], scopes=rows, scope_macro={"hit@5": 0.5})
    console = Console(width=200, record=True)
    console.print(strata_table(report, "per scope", scopes=True))
    text = console.export_text()
    shown = [line.split()[0] for line in text.splitlines() if line.startswith("q")]
    assert len(shown) == MAX_SCOPE_ROWS and all(int(tag[1:]) % 2 == 0 for tag in shown)
    assert f"the {MAX_SCOPE_ROWS} lowest of 50 scopes by hit@5" in " ".join(text.split())
    from evalloop.report.markdown import _strata  # the pull-request comment folds the same rows

    markdown = "\n".join(_strata(report))
    assert f"per scope — run <code>r</code>, the {MAX_SCOPE_ROWS} lowest of 50" in markdown
    rows_md = [line for line in markdown.splitlines() if line.startswith("| `q")]
    assert len(rows_md) == MAX_SCOPE_ROWS and all(int(r.split("`")[1][1:]) % 2 == 0 for r in rows_md)
    assert "| macro | 50 | 0.500 |" in markdown and "per stratum" not in markdown


def test_python_api_scores_a_scoped_dataset_as_the_suite_does(files, tmp_path):
    from evalloop.errors import TargetError
    from evalloop.retrieval.dataset import load_dataset
    from evalloop.retrieval.retriever_eval import run_retriever
    from evalloop.retrieval.retrievers import retriever_factory, run_scoped

    assert cli(tmp_path, "bench", "import", "locomo", str(files[0])).returncode == 0
    suite = json.loads(cli(tmp_path, "run", "--suite", "locomo", "--json").stdout)
    means = {s["scorer"]: s["current"] for s in suite["scorers"]}
    dataset = load_dataset(tmp_path / "fixtures" / "locomo")
    result = run_scoped(retriever_factory("bm25"), dataset, k=20)
    for metric in ("recall@5", "recall@10", "ndcg@10", "mrr@20"):
        assert result.overall[metric.removesuffix("@20")] == pytest.approx(means[metric])
    with pytest.raises(TargetError, match="is scoped"):
        run_retriever(retriever_factory("bm25")(), dataset)
