"""evalloop: evaluate an LLM-powered system, detect regressions, and feed them back as memories.

The public API is re-exported here; everything else may change between versions.
"""

from evalloop.baseline import Comparison, ScorerComparison, compare_run
from evalloop.config import Settings, load_settings
from evalloop.errors import EvalloopError
from evalloop.history import HistoryStore, Run
from evalloop.pipeline import RunReport, arun_suite, run_suite
from evalloop.score import Score, ScorerKind
from evalloop.scoring.registry import Registry, discover, scorer
from evalloop.suites import Case, Suite, find_suite, load_suite

__version__ = "0.1.0"

__all__ = [
    "Case", "Comparison", "EvalloopError", "HistoryStore", "Registry", "Run", "RunReport",
    "Score", "ScorerComparison", "ScorerKind", "Settings", "Suite", "arun_suite", "compare_run",
    "discover", "find_suite", "load_settings", "load_suite", "run_suite", "scorer",
]
