"""``evalloop bench generate`` and ``evalloop compare-targets``: memory-system benchmarks as suites."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from evalloop.cli.app import JsonOpt, ProjectOpt, app, friendly, out, settings_for
from evalloop.errors import FixtureError

if TYPE_CHECKING:
    from evalloop.retrieval.loaders import ImportReport
    from evalloop.retrieval.suite_compare import TargetResult

# the options `bench generate` and `bench import` share: the suite they write
RetrieverOpt = Annotated[str, typer.Option(help="Suite target: bm25, hybrid, memory, or module:Class.")]
SuiteNameOpt = Annotated[str | None, typer.Option(help="Suite name (default: the folder name).")]
ForceOpt = Annotated[bool, typer.Option("--force", help="Overwrite existing files.")]

bench_app = typer.Typer(help="Generate or import memory-system benchmark datasets and suites.",
                        no_args_is_help=True)
app.add_typer(bench_app, name="bench")

IR_SCORERS = ["recall@5", "recall@10", "ndcg@10", "mrr@20"]  # the suites retrieve k=20
SUBSTRING_SCORERS = ["substring-hit", "substring-mrr", "change-detection", "null-rejection"]


def write_benchmark(out_dir: Path, *, weeks: int = 4, seed: int = 42, mode: Literal["fast", "full"] = "fast",
                    delivery: Literal["facts", "journal"] = "facts", kind: str = "qrels", retriever: str = "bm25",
                    name: str | None = None, force: bool = False) -> tuple[Path, Path]:
    """Write a seed-000 synthetic corpus as a dataset folder and a suite file beside it."""
    from evalloop.retrieval.dataset import write_dataset
    from evalloop.retrieval.generator import generate_corpus, to_dataset

    suite_file = out_dir.parent / f"{out_dir.name}.yaml"
    if not force and (suite_file.exists() or (out_dir / "corpus.jsonl").exists()):
        raise FixtureError("benchmark files already exist", where=str(out_dir),
                           hint="pass --force to overwrite, or choose another --out")
    corpus = generate_corpus(weeks=weeks, mode=mode, seed=seed)
    dataset = to_dataset(corpus, delivery=delivery)
    params: dict[str, object] = {"retriever": retriever, "k": 20}
    if kind == "qrels":
        write_dataset(dataset, out_dir)
        scorers: list[str] = IR_SCORERS
        what = f"{len(dataset.queries)} queries with graded qrels"
    else:
        out_dir.mkdir(parents=True, exist_ok=True)
        with (out_dir / "corpus.jsonl").open("w", encoding="utf-8") as fh:
            for doc in dataset.corpus:
                fh.write(json.dumps(doc.model_dump(mode="json"), ensure_ascii=False) + "\n")
        queries = [q for q in corpus.queries_for() if q.scorable]
        with (out_dir / "substring.jsonl").open("w", encoding="utf-8") as fh:
            for q in queries:
                fh.write(q.model_dump_json(exclude_defaults=True) + "\n")
        for stale in ("queries.jsonl", "qrels.jsonl"):
            (out_dir / stale).unlink(missing_ok=True)
        scorers, params = SUBSTRING_SCORERS, {**params, "k": 5, "returns": "texts"}
        what = f"{len(queries)} substring-judged queries"
    suite = {
        "name": name or out_dir.name,
        "description": f"Synthetic memory corpus (seed 000): {weeks} weeks, {mode}, seed {seed}, "
                       f"{delivery} delivery, {len(dataset.corpus)} docs, {what}.",
        "target": {"ref": "evalloop.retrieval.suite_targets:RetrieverTarget", "params": params},
        "scorers": scorers,
        "dataset": out_dir.name,
    }
    _write_suite(suite_file, suite)
    return out_dir, suite_file


def _write_suite(path: Path, suite: dict) -> None:
    import yaml

    path.write_text(yaml.safe_dump(suite, sort_keys=False, width=100), encoding="utf-8")


@bench_app.command("generate")
@friendly
def generate(
    out_dir: Annotated[Path, typer.Option("--out", help="Dataset folder to write; the suite "
                                          "file goes beside it as <folder>.yaml.")],
    weeks: Annotated[int, typer.Option(min=1, max=52, help="Weeks of memories.")] = 4,
    seed: Annotated[int, typer.Option(help="Random seed (same seed, same corpus).")] = 42,
    mode: Annotated[Literal["fast", "full"], typer.Option(help="Facts per week.")] = "fast",
    delivery: Annotated[Literal["facts", "journal"], typer.Option(
        help="One doc per fact, or one per markdown journal file.")] = "facts",
    kind: Annotated[Literal["qrels", "substring"], typer.Option(
        help="Graded qrels (IR metrics) or substring relevance (seed 000 query sets).")] = "qrels",
    retriever: RetrieverOpt = "bm25",
    name: SuiteNameOpt = None,
    force: ForceOpt = False,
) -> None:
    """Write a synthetic memory benchmark (corpus, queries, judgments) and a suite that runs it.

    Example: [bold]evalloop bench generate --out fixtures/memory-bench --weeks 4[/bold]
    """
    folder, suite_file = write_benchmark(out_dir, weeks=weeks, seed=seed, mode=mode,
                                         delivery=delivery, kind=kind, retriever=retriever,
                                         name=name, force=force)
    out().print(f"wrote {folder}/ and {suite_file}; run it with "
                f"[bold]evalloop run --suite {suite_file}[/bold]")


SCOPED_SCORERS: list[object] = [{"name": "hit", "params": {"k": 5}}, {"name": "hit", "params": {"k": 10}},
                                "recall@5", "recall@10", "ndcg@10", "mrr@20"]


JUDGES: list[object] = [{"name": "j-judge", "params": {"judge": "mem0"}, "as": "j-mem0"},
                        {"name": "j-judge", "params": {"judge": "strict"}, "as": "j-strict"}]
QA_SCORERS: dict[str, list[object]] = {
    # LoCoMo's own scoring (locomo-f1, locomo-adversarial) beside mem0's columns and evalloop's
    "locomo": [*JUDGES, "locomo-f1", "bleu-1", "evalloop-f1", "locomo-adversarial", "abstention"],
    "longmemeval": [*JUDGES, "locomo-f1", "bleu-1", "evalloop-f1", "abstention"],
}
QA_PROTOCOL = {"locomo": "locomo", "longmemeval": "evalloop"}


def write_import(fmt: str, source: Path, out_dir: Path, *, granularity: Literal["session", "turn"] = "session",
                 retriever: str = "bm25", name: str | None = None, force: bool = False,
                 dates: bool = True, qa_k: int = 10) -> tuple[Path, ImportReport]:
    """Write a published benchmark file as two suites beside their folders: a scoped retrieval
    suite (``<folder>.yaml``) and a memory-QA suite (``<folder>-qa.yaml``: retrieve, answer
    with the run's model, grade with the J judge, token F1 and abstention)."""
    from evalloop.retrieval.answers import write_answers
    from evalloop.retrieval.dataset import write_dataset
    from evalloop.retrieval.loaders import (
        locomo_retrieval,
        longmemeval_retrieval,
        read_locomo,
        read_longmemeval,
    )

    suite_file = out_dir.parent / f"{out_dir.name}.yaml"
    qa_dir = out_dir.parent / f"{out_dir.name}-qa"
    qa_file = out_dir.parent / f"{qa_dir.name}.yaml"
    if not force and any(p.exists() for p in (suite_file, qa_file, out_dir / "corpus.jsonl")):
        raise FixtureError("benchmark files already exist", where=str(out_dir),
                           hint="pass --force to overwrite, or choose another --out")
    if fmt == "locomo":
        data = read_locomo(source, dates=dates)
        dataset, report = locomo_retrieval(data, source, dates=dates)
    else:
        data = read_longmemeval(source, granularity, dates=dates)
        dataset, report = longmemeval_retrieval(data, source, granularity, dates=dates)
    write_dataset(dataset, out_dir)
    report.qa_skipped = write_answers(qa_dir, data.docs, data.questions)
    report.n_qa = len(data.questions) - sum(report.qa_skipped.values())
    record = report.model_dump_json(indent=2) + "\n"
    for folder in (out_dir, qa_dir):
        (folder / "import.json").write_text(record, encoding="utf-8")
    suite = {
        "name": name or out_dir.name,
        "description": f"{report.format} from {source.name}: {report.n_docs} documents in "
                       f"{report.n_scopes} scopes, {report.n_queries} questions "
                       f"({report.n_skipped} skipped); each question searches its own scope.",
        "target": {"ref": "evalloop.retrieval.suite_targets:RetrieverTarget",
                   "params": {"retriever": retriever, "k": 20}},
        "scorers": SCOPED_SCORERS,
        "dataset": out_dir.name,
    }
    _write_suite(suite_file, suite)
    n_adv = sum(1 for q in data.questions if q.adversarial)
    qa_suite = {
        "name": f"{name or out_dir.name}-qa",
        "description": f"{report.format} QA from {source.name}: {report.n_qa} questions "
                       f"({n_adv} adversarial, graded by abstention only); each retrieves its top "
                       f"{qa_k} from its own conversation and the run's model answers "
                       f"({QA_PROTOCOL[fmt]} protocol). j-mem0 is mem0's J judge (same topic), "
                       f"j-strict evalloop's (same fact); locomo-f1 is LoCoMo's own token F1, "
                       f"evalloop-f1 evalloop's corrected one.",
        "target": {"ref": "evalloop.retrieval.answer_target:AnswerTarget",
                   "params": {"retriever": retriever, "k": qa_k, "protocol": QA_PROTOCOL[fmt]}},
        "scorers": QA_SCORERS[fmt],
        "dataset": qa_dir.name,
    }
    _write_suite(qa_file, qa_suite)
    return suite_file, report


@bench_app.command("conversations")
@friendly
def conversations_cmd(
    out_file: Annotated[Path, typer.Option("--out", help="JSON file to write, in LoCoMo's format.")],
    n: Annotated[int, typer.Option("--n", min=1, max=200, help="Conversations.")] = 6,
    sessions: Annotated[int, typer.Option(min=1, max=10, help="Dated sessions per conversation.")] = 5,
    seed: Annotated[int, typer.Option(help="Random seed (same seed, same file).")] = 1,
    force: ForceOpt = False,
) -> None:
    """Write generated multi-session conversations in LoCoMo's published JSON format.

    Two friends per conversation, dated sessions, chit-chat and fact turns, with single-hop,
    temporal, multi-hop and adversarial questions: a file to try `bench import locomo` on.
    Example: [bold]evalloop bench conversations --out conversations.json[/bold]
    """
    from evalloop.retrieval.conversations import generate_conversations

    if out_file.exists() and not force:
        raise FixtureError("file already exists", where=str(out_file), hint="pass --force to overwrite")
    samples = generate_conversations(n, sessions=sessions, seed=seed)
    out_file.write_text(json.dumps(samples, indent=1) + "\n", encoding="utf-8")
    questions = sum(len(s["qa"]) for s in samples)
    out().print(f"wrote {out_file} ({n} conversations, {questions} questions); import it with "
                f"[bold]evalloop bench import locomo {out_file}[/bold]", highlight=False)


@bench_app.command("import")
@friendly
def import_cmd(
    fmt: Annotated[Literal["locomo", "longmemeval"], typer.Argument(help="The file's format.")],
    source: Annotated[Path, typer.Argument(help="locomo10.json, or a LongMemEval JSON file.")],
    out_dir: Annotated[Path | None, typer.Option("--out", help="Dataset folder to write (default "
                       "fixtures/<format>); the suite goes beside it as <folder>.yaml.")] = None,
    granularity: Annotated[Literal["session", "turn"], typer.Option(
        help="LongMemEval: one document per session or per turn.")] = "session",
    retriever: RetrieverOpt = "bm25",
    name: SuiteNameOpt = None,
    force: ForceOpt = False,
    dates: Annotated[bool, typer.Option("--dates/--no-dates", help="Write each session's date "
                     "into its documents' text (temporal questions need it); --no-dates for the "
                     "ablation.")] = True,
) -> None:
    """Turn a published memory benchmark (LoCoMo, LongMemEval) into a retrieval and a QA suite.

    Retrieval (<folder>.yaml): documents are the dialogue turns (or sessions), queries the
    questions with their evidence as judgments, the category as stratum; each question searches
    only its own conversation. QA (<folder>-qa.yaml): each question retrieves from its own
    conversation, the run's model answers, and the J judge, LoCoMo's token F1 and abstention
    (adversarial questions only) grade the answer, as the published tables do.

    Example: [bold]evalloop bench import locomo locomo10.json --out fixtures/locomo[/bold]
    """
    folder = out_dir or Path("fixtures") / fmt
    suite_file, report = write_import(fmt, source, folder, granularity=granularity,
                                      retriever=retriever, name=name, force=force, dates=dates)
    qa_file = suite_file.with_name(f"{suite_file.stem}-qa.yaml")
    out().print(f"wrote {folder}/ ({report.n_docs} documents, {report.n_scopes} scopes, "
                f"{report.n_queries} questions; {report.summary()}) and {suite_file}; run it with "
                f"[bold]evalloop run --suite {suite_file}[/bold]", highlight=False)
    out().print(f"wrote the QA suite {qa_file} ({report.n_qa} questions); it needs an answer "
                f"model and a judge: [bold]evalloop run --suite {qa_file}[/bold]", highlight=False)


def _cell(result: TargetResult, scorer: str) -> str:
    """A mean with its spread over epochs (± std), its 95% interval, and its difference from the
    reference with stars; the interval on its own line, so a column stays narrow."""
    from evalloop.report.format import num

    text = num(result.means.get(scorer))
    if scorer in result.spread:
        text += f" ± {result.spread[scorer][1]:.3f}"
    if scorer in result.intervals:
        low, high = result.intervals[scorer]
        text += f"\n[{low:.2f}–{high:.2f}]"
    diff = result.vs_reference.get(scorer)
    if diff is not None and diff.p_value is not None:
        from evalloop.verdicts.stats import stars

        text += f" {diff.diff:+.3f}{stars(diff.p_value)}"
    return text


def _ms(value: object) -> str:
    return "—" if not isinstance(value, int | float) else f"{value:.2f}"


def _measures(stats: dict, qa: bool) -> dict[str, str]:
    """The measurement columns of one target: latency, tokens, cost, memory size and what
    building the memory cost (a system's LLM extraction) for a QA suite; latency, build time and
    index size for a retrieval one."""
    size, build = stats.get("index_bytes"), stats.get("build_s")
    kb = "—" if size is None else f"{size / 1024:.0f}"
    if not qa:
        return {"p50 ms": _ms(stats.get("latency_p50_ms")), "p95 ms": _ms(stats.get("latency_p95_ms")),
                "build ms": _ms(None if build is None else build * 1000.0), "index KB": kb}
    cost, built = stats.get("answer_cost_usd"), stats.get("extraction_cost_usd")
    return {"search p50": _ms(stats.get("search_p50_ms")), "search p95": _ms(stats.get("search_p95_ms")),
            "total p50": _ms(stats.get("total_p50_ms")), "total p95": _ms(stats.get("total_p95_ms")),
            "tokens/q": _ms(stats.get("tokens_per_question")), "cost $": "—" if cost is None else f"{cost:.4f}",
            "memory tok/conv": _ms(stats.get("memory_tokens_per_scope")),
            "build $": "—" if built is None else f"{built:.4f}"}


@app.command("compare-targets")
@friendly
def compare_targets_cmd(
    suite: Annotated[str, typer.Option("--suite", "-s", help="Suite name or file.")],
    target: Annotated[list[str], typer.Option("--target", "-t", help="A retriever (bm25, hybrid, "
                      "hybrid-seed000, memory, module:Class), optionally with options for an "
                      "ablation (memory[vector_weight=0]), or a module:function target. Repeat; "
                      "the first is the reference.")],
    record: Annotated[bool, typer.Option("--record", help="Store each run in the project "
                      "history as suite <suite>.<target> (own baselines).")] = False,
    strata: Annotated[bool, typer.Option("--strata", help="Also print per-stratum means.")] = False,
    limit: Annotated[int | None, typer.Option(min=1, help="About N cases: whole conversations drawn "
                     "at random (--seed) on a scoped suite, else the first N.")] = None,
    seed: Annotated[int, typer.Option(help="Which conversations --limit draws.")] = 0,
    epochs: Annotated[int | None, typer.Option(min=1, metavar="N", help="Run every case N times; "
                      "each mean gets its standard deviation over the N epochs.")] = None,
    json_out: JsonOpt = False,
    project: ProjectOpt = None,
) -> None:
    """Run one suite against several targets and print their metrics side by side.

    Differences from the first target are tested with a paired permutation test on per-case
    scores (* p<0.05, ** p<0.01, *** p<0.001); on a scoped suite (LoCoMo, LongMemEval) whole
    conversations are flipped, since questions of one conversation are not independent.

    Example: [bold]evalloop compare-targets -s retrieval-bm25 -t bm25 -t hybrid -t memory[/bold]
    """
    import asyncio

    from rich.markup import escape
    from rich.table import Table

    from evalloop.retrieval.suite_compare import acompare_targets

    settings = settings_for(project)
    result = asyncio.run(acompare_targets(suite, target, settings=settings, record=record,
                                          limit=limit, seed=seed, epochs=epochs))
    if json_out:
        print(result.model_dump_json(indent=2))
        return
    console = out()
    console.print(f"[bold]{result.suite}[/bold]  {result.n_cases} cases  "
                  f"reference: {escape(result.reference)}")
    if result.sample:
        console.print(f"  --limit: {result.sample}", highlight=False)
    table = Table(show_edge=False, pad_edge=False)
    table.add_column("target")
    for s in result.scorers:
        table.add_column(s, justify="right")
    for r in result.results:
        table.add_row(escape(r.target), *[_cell(r, s) for s in result.scorers])
    console.print(table)
    qa = any("total_p50_ms" in r.stats for r in result.results)  # a memory-QA suite: answers too
    measures = {r.target: _measures(r.stats, qa) for r in result.results}
    cols = next(iter(measures.values()), {})
    spent = Table(show_edge=False, pad_edge=False)
    spent.add_column("target")
    for col in cols:
        spent.add_column(col, justify="right")
    for r in result.results:
        spent.add_row(escape(r.target), *measures[r.target].values())
    console.print(spent)
    spreads = {n for r in result.results for _, _, n in r.spread.values()}
    if spreads:
        console.print(f"  ± is the standard deviation of the mean over {max(spreads)} epochs", highlight=False)
    tests = {d.test for r in result.results for d in r.vs_reference.values()}
    if "paired permutation by scope" in tests:
        console.print(escape("  [lo–hi]: 95% interval of the mean, whole conversations resampled; differences "
                             "tested by conversation (whole scopes flipped)"), highlight=False)
    else:
        console.print(escape("  [lo–hi]: 95% bootstrap interval of the mean"), highlight=False)
    from evalloop.report.terminal import target_lines

    for r in result.results:  # each target's benchmark card: what its figures were measured with
        for line in target_lines({"card": r.stats["card"]} if "card" in r.stats else {}):
            console.print(escape(f"  {r.target} {line}"), highlight=False)
    if strata:
        from evalloop.report.strata import strata_table

        for r in result.results:
            console.print(strata_table(r.strata, title=f"{escape(r.target)} per stratum"))
            if r.strata.scopes:
                console.print(strata_table(r.strata, title=f"{escape(r.target)} per scope", scopes=True))
