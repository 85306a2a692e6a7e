"""The suite models' one import path: ``from evalloop.suites.models import Case, Suite, load_suite``.

Each concept lives in its own module, and this one names them all for the package's readers:

- :mod:`~evalloop.suites.case`: a case (``Case``) and the scope its tags name (``SCOPE_TAG``, ``scope_of``)
- :mod:`~evalloop.suites.refs`: the scorers and target a suite names (``ScorerRef``, ``TargetRef``)
- :mod:`~evalloop.suites.settings`: a suite's ``verdict:`` and ``early_stop:`` blocks
- :mod:`~evalloop.suites.holdout`: which cases are held out of learning (``Holdout``, ``holdout_bucket``)
- :mod:`~evalloop.suites.casesource`: cases read and validated from a JSONL file, a list or a
  registered case source
- :mod:`~evalloop.suites.suite`: the suite (``Suite``): its cases read, checked and split
- :mod:`~evalloop.suites.load`: a suite file loaded and validated (``load_suite``)
"""

from __future__ import annotations

from evalloop.suites.case import SCOPE_TAG, Case, scope_of
from evalloop.suites.casesource import (
    CaseSource,
    case_source,
    jsonl_cases,
    read_case,
    register_case_source,
    valid_cases,
)
from evalloop.suites.holdout import Holdout, holdout_bucket
from evalloop.suites.load import PACKAGE_FIXTURES, SUITE_SUFFIXES, load_suite
from evalloop.suites.refs import MOVED_TARGET_MODULES, MOVED_TARGETS, ScorerRef, TargetRef
from evalloop.suites.settings import EarlyStop, SuiteVerdict
from evalloop.suites.suite import KEEP_PARSED_BYTES, Suite

__all__ = [
    "KEEP_PARSED_BYTES", "MOVED_TARGETS", "MOVED_TARGET_MODULES", "PACKAGE_FIXTURES", "SCOPE_TAG",
    "SUITE_SUFFIXES", "Case", "CaseSource", "EarlyStop", "Holdout", "ScorerRef", "Suite", "SuiteVerdict",
    "TargetRef", "case_source", "holdout_bucket", "jsonl_cases", "load_suite", "read_case",
    "register_case_source", "scope_of", "valid_cases",
]
