"""Memory-system benchmarks: retrieval datasets, IR metrics, reference retrievers, generators.

The pure machinery behind retrieval suites; suites, history and the CLI wire it in.
"""

from evalloop.retrieval.baselines import (
    REFERENCE_RETRIEVERS,
    Fts5Bm25Retriever,
    OpenClawHybridRetriever,
    reference_retrievers,
)
from evalloop.retrieval.compare import Comparison, ComparisonRow, compare
from evalloop.retrieval.dataset import Dataset, load_dataset, write_dataset
from evalloop.retrieval.generator import Fact, SyntheticCorpus, generate_corpus, to_dataset
from evalloop.retrieval.hybrid import chunk_markdown
from evalloop.retrieval.journal import journal_files, write_journals
from evalloop.retrieval.metrics import DEFAULT_KS, MetricTable, evaluate, metric_names
from evalloop.retrieval.qa import MemoryTarget, QAPair, QAReport, arun_qa, run_qa, token_f1
from evalloop.retrieval.runner import RetrievalResult, result_from_run, run_retriever
from evalloop.retrieval.scenarios import (
    ChatTarget,
    Scenario,
    ScenarioReport,
    Turn,
    arun_scenarios,
    run_scenarios,
)
from evalloop.retrieval.substring import (
    SubstringQuery,
    SubstringReport,
    run_substring_queries,
    score_results,
    text_search,
)
from evalloop.retrieval.types import Doc, Qrels, Query, Retriever, Run, as_retriever

__all__ = [
    "DEFAULT_KS",
    "REFERENCE_RETRIEVERS",
    "ChatTarget",
    "Comparison",
    "ComparisonRow",
    "Dataset",
    "Doc",
    "Fact",
    "Fts5Bm25Retriever",
    "MemoryTarget",
    "MetricTable",
    "OpenClawHybridRetriever",
    "QAPair",
    "QAReport",
    "Qrels",
    "Query",
    "RetrievalResult",
    "Retriever",
    "Run",
    "Scenario",
    "ScenarioReport",
    "SubstringQuery",
    "SubstringReport",
    "SyntheticCorpus",
    "Turn",
    "arun_qa",
    "arun_scenarios",
    "as_retriever",
    "chunk_markdown",
    "compare",
    "evaluate",
    "generate_corpus",
    "journal_files",
    "load_dataset",
    "metric_names",
    "reference_retrievers",
    "result_from_run",
    "run_qa",
    "run_retriever",
    "run_scenarios",
    "run_substring_queries",
    "score_results",
    "text_search",
    "to_dataset",
    "token_f1",
    "write_dataset",
    "write_journals",
]
