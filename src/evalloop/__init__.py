"""evalloop: evaluate an LLM-powered system, detect regressions, and feed them back as memories.

The public API is re-exported here, imported on first use (so that, for example, the pytest
plugin costs nothing in a session that does not use it); everything else may change between
versions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from evalloop.lazy import lazy_exports

__version__ = "0.1.0"

_EXPORTS = {
    "Case": "evalloop.suites.models", "Suite": "evalloop.suites.models", "load_suite": "evalloop.suites.models",
    "find_suite": "evalloop.suites.lookup",
    "Comparison": "evalloop.verdicts.baseline", "ScorerComparison": "evalloop.verdicts.baseline",
    "compare_run": "evalloop.verdicts.baseline",
    "Settings": "evalloop.config", "load_settings": "evalloop.config",
    "EvalloopError": "evalloop.errors",
    "HistoryStore": "evalloop.history", "Run": "evalloop.history",
    "enhance_prompt": "evalloop.learning.injection", "failure_patterns": "evalloop.learning.injection",
    "learn": "evalloop.learning.incidents", "lessons": "evalloop.learning.lessons",
    "RunReport": "evalloop.loop.pipeline", "arun_suite": "evalloop.loop.pipeline",
    "run_suite": "evalloop.loop.pipeline", "RunOptions": "evalloop.run.options",
    "Score": "evalloop.score", "ScorerKind": "evalloop.score",
    "Registry": "evalloop.scoring.registry", "discover": "evalloop.scoring.registry",
    "scorer": "evalloop.scoring.registry",
    "Verdict": "evalloop.verdicts.verdict", "VerdictPolicy": "evalloop.verdicts.verdict",
    "decide": "evalloop.verdicts.verdict",
    "MemoryStore": "evalloop.memory", "MemoryAdapter": "evalloop.memory",
    "HTTPMemoryAdapter": "evalloop.memory", "FoundMemory": "evalloop.memory",
    "default_embedder": "evalloop.memory", "resolve_embedder": "evalloop.memory",
    "Sink": "evalloop.scheduling.sinks", "register_sink": "evalloop.scheduling.sinks",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())


if TYPE_CHECKING:  # for type checkers and IDEs
    from evalloop.config import Settings, load_settings  # noqa: F401
    from evalloop.errors import EvalloopError  # noqa: F401
    from evalloop.history import HistoryStore, Run  # noqa: F401
    from evalloop.learning.incidents import learn  # noqa: F401
    from evalloop.learning.injection import enhance_prompt, failure_patterns  # noqa: F401
    from evalloop.learning.lessons import lessons  # noqa: F401
    from evalloop.loop.pipeline import RunReport, arun_suite, run_suite  # noqa: F401
    from evalloop.memory import (  # noqa: F401
        FoundMemory,
        HTTPMemoryAdapter,
        MemoryAdapter,
        MemoryStore,
        default_embedder,
        resolve_embedder,
    )
    from evalloop.run.options import RunOptions  # noqa: F401
    from evalloop.scheduling.sinks import Sink, register_sink  # noqa: F401
    from evalloop.score import Score, ScorerKind  # noqa: F401
    from evalloop.scoring.registry import Registry, discover, scorer  # noqa: F401
    from evalloop.suites.lookup import find_suite  # noqa: F401
    from evalloop.suites.models import Case, Suite, load_suite  # noqa: F401
    from evalloop.verdicts.baseline import Comparison, ScorerComparison, compare_run  # noqa: F401
    from evalloop.verdicts.verdict import Verdict, VerdictPolicy, decide  # noqa: F401
