"""The history store: writing runs as they happen and reading them back for baselines.

SQLite under ``history/`` by default; any SQLAlchemy URL works. :class:`HistoryStore` is the one
class to import; its parts live by concept:

- :mod:`~evalloop.history.storebase`: the database (engine, read sessions, clock) and the
  mapping of database errors to one StoreError line, for every public method;
- :mod:`~evalloop.history.rows`: the tables as Core handles and model objects from Core rows;
- :mod:`~evalloop.history.writes`: a run's writes, begin to finish, with its lease and case rows;
- :mod:`~evalloop.history.runreads`: runs and their summaries read back;
- :mod:`~evalloop.history.baselines`: the baseline and reference candidates of a run;
- :mod:`~evalloop.history.casereads`: a run's case rows read back.
"""

from __future__ import annotations

from evalloop.environ import variable
from evalloop.history.baselines import BaselineReads
from evalloop.history.casereads import CaseReads
from evalloop.history.engine import get_engine as get_engine
from evalloop.history.models import dumps as dumps  # compact JSON: the package's writers import it from here
from evalloop.history.rows import RESULTS as RESULTS
from evalloop.history.rows import RUNS as RUNS
from evalloop.history.rows import SCORES as SCORES
from evalloop.history.rows import SUMMARIES as SUMMARIES
from evalloop.history.rows import VECTORS as VECTORS
from evalloop.history.rows import as_models as as_models
from evalloop.history.runreads import RunReads
from evalloop.history.storebase import mapped as mapped
from evalloop.history.writes import CASE_RESULT_COLUMNS as CASE_RESULT_COLUMNS
from evalloop.history.writes import CASE_SCORE_COLUMNS as CASE_SCORE_COLUMNS
from evalloop.history.writes import RUN_BEAT_SECONDS as RUN_BEAT_SECONDS
from evalloop.history.writes import RUN_LEASE_SECONDS as RUN_LEASE_SECONDS
from evalloop.history.writes import RunWrites

#: the environment variable that names a scheduled fire's ledger entry to the run it starts
#: (kept in the run's notes as ``fire``, so a host taking over a dead fire finds its run)
FIRE_ENV = variable("fire_entry")


class HistoryStore(RunWrites, RunReads, BaselineReads, CaseReads):
    """Runs, summaries, case results and scores of every suite, in one database.

    A database error in any method comes out as one :class:`~evalloop.errors.StoreError` line.
    """
