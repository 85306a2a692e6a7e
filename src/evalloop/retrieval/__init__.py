"""Memory-system benchmarks: retrieval datasets, IR metrics, reference retrievers, generators.

The pure machinery behind retrieval suites; suites, history and the CLI wire it in. The names
below are imported on first use: a scorer that needs one metric loads one module, not all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from evalloop.lazy import lazy_exports

_EXPORTS = {
    "ChatTarget": "evalloop.retrieval.scenarios",
    "Comparison": "evalloop.retrieval.compare",
    "ComparisonRow": "evalloop.retrieval.compare",
    "DEFAULT_KS": "evalloop.retrieval.metrics",
    "Dataset": "evalloop.retrieval.dataset",
    "Doc": "evalloop.retrieval.types",
    "Fact": "evalloop.retrieval.facts",
    "Fts5Bm25Retriever": "evalloop.retrieval.reference_retrievers",
    "MemoryTarget": "evalloop.retrieval.qa",
    "MetricTable": "evalloop.retrieval.metrics",
    "OpenClawHybridRetriever": "evalloop.retrieval.reference_retrievers",
    "QAPair": "evalloop.retrieval.qa",
    "QAReport": "evalloop.retrieval.qa",
    "Qrels": "evalloop.retrieval.types",
    "Query": "evalloop.retrieval.types",
    "REFERENCE_RETRIEVERS": "evalloop.retrieval.reference_retrievers",
    "RetrievalResult": "evalloop.retrieval.retriever_eval",
    "Retriever": "evalloop.retrieval.types",
    "Run": "evalloop.retrieval.types",
    "Scenario": "evalloop.retrieval.scenarios",
    "ScenarioReport": "evalloop.retrieval.scenarios",
    "SubstringQuery": "evalloop.retrieval.substring",
    "SubstringReport": "evalloop.retrieval.substring",
    "SyntheticCorpus": "evalloop.retrieval.generator",
    "Turn": "evalloop.retrieval.scenarios",
    "arun_qa": "evalloop.retrieval.qa",
    "arun_scenarios": "evalloop.retrieval.scenarios",
    "as_retriever": "evalloop.retrieval.types",
    "chunk_markdown": "evalloop.retrieval.hybrid",
    "compare": "evalloop.retrieval.compare",
    "evaluate": "evalloop.retrieval.metrics",
    "generate_corpus": "evalloop.retrieval.generator",
    "journal_files": "evalloop.retrieval.journal",
    "load_dataset": "evalloop.retrieval.dataset",
    "metric_names": "evalloop.retrieval.metrics",
    "reference_retrievers": "evalloop.retrieval.reference_retrievers",
    "result_from_run": "evalloop.retrieval.retriever_eval",
    "run_qa": "evalloop.retrieval.qa",
    "run_retriever": "evalloop.retrieval.retriever_eval",
    "run_scenarios": "evalloop.retrieval.scenarios",
    "run_substring_queries": "evalloop.retrieval.substring",
    "score_results": "evalloop.retrieval.substring",
    "text_search": "evalloop.retrieval.substring",
    "to_dataset": "evalloop.retrieval.generator",
    "token_f1": "evalloop.retrieval.qa",
    "write_dataset": "evalloop.retrieval.dataset",
    "write_journals": "evalloop.retrieval.journal",
}

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

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())


if TYPE_CHECKING:  # for type checkers and IDEs
    from evalloop.retrieval.compare import Comparison, ComparisonRow, compare
    from evalloop.retrieval.dataset import Dataset, load_dataset, write_dataset
    from evalloop.retrieval.facts import Fact
    from evalloop.retrieval.generator import SyntheticCorpus, generate_corpus, to_dataset
    from evalloop.retrieval.hybrid import chunk_markdown
    from evalloop.retrieval.journal import journal_files, write_journals
    from evalloop.retrieval.metrics import DEFAULT_KS, MetricTable, evaluate, metric_names
    from evalloop.retrieval.qa import MemoryTarget, QAPair, QAReport, arun_qa, run_qa, token_f1
    from evalloop.retrieval.reference_retrievers import (  # noqa: F401
        REFERENCE_RETRIEVERS,
        Fts5Bm25Retriever,
        OpenClawHybridRetriever,
        reference_retrievers,
    )
    from evalloop.retrieval.retriever_eval import RetrievalResult, result_from_run, run_retriever
    from evalloop.retrieval.scenarios import (  # noqa: F401
        ChatTarget,
        Scenario,
        ScenarioReport,
        Turn,
        arun_scenarios,
        run_scenarios,
    )
    from evalloop.retrieval.substring import (  # noqa: F401
        SubstringQuery,
        SubstringReport,
        run_substring_queries,
        score_results,
        text_search,
    )
    from evalloop.retrieval.types import Doc, Qrels, Query, Retriever, Run, as_retriever
