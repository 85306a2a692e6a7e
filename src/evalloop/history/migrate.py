"""``evalloop history migrate``: bring a history database to this evalloop's revision, explicitly.

On a shared server nothing else migrates (:mod:`evalloop.history.version`): run it once, from one
host, after every host that writes to the database has the new evalloop. It runs the numbered
migrations it lacks (:mod:`evalloop.history.migrations`) in one transaction under the DDL
advisory lock. A revision this evalloop does not know (a newer one's) is never touched.
"""

from __future__ import annotations

from evalloop.history import version
from evalloop.history.engine import bring_up_to_date, forget, new_engine, store_where


def migrate(url: str) -> tuple[str | None, str]:
    """Migrate the database at ``url``: (its revision before — None when it was empty,
    ``pre-alembic:<revision>`` when it was made before numbered migrations — and the revision now)."""
    engine = new_engine(url)
    where = store_where(url)
    try:
        found = version.stored_revision(engine)
        if found is not None and found != version.PRE_ALEMBIC:
            version.raise_if_newer(found, where)  # a newer schema is never downgraded
        before = bring_up_to_date(engine, where)
    finally:
        engine.dispose()
    forget(url)
    return before, version.HEAD
