"""Run history: the stored runs, summaries, case results and scores, and the store over them."""

from evalloop.history.models import CaseResult, CaseScore, Run, RunStatus, ScorerSummary
from evalloop.history.provenance import code_version, new_run_id
from evalloop.history.store import HistoryStore

__all__ = ["CaseResult", "CaseScore", "HistoryStore", "Run", "RunStatus", "ScorerSummary",
           "code_version", "new_run_id"]
