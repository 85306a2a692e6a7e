"""Alembic's environment for evalloop's history: migrations run on the connection evalloop
opened (``config.attributes["connection"]``, in its transaction), never on a URL of their own."""

from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection

from evalloop.history.models import metadata

#: tables in the database that are not evalloop's migrations' business (APScheduler's job store;
#: Alembic's own version table is declared as a model only to create it with the others)
FOREIGN = frozenset({"evalloop_jobs", "apscheduler_jobs", "alembic_version"})


def include_name(name: str | None, type_: str, parent_names: object) -> bool:
    return not (type_ == "table" and name in FOREIGN)


def run() -> None:
    connection = context.config.attributes.get("connection")
    if not isinstance(connection, Connection):
        raise RuntimeError("evalloop's migrations run on a connection evalloop opens "
                           "(evalloop.history.migrations.upgrade), not from a URL")
    context.configure(connection=connection, target_metadata=metadata, render_as_batch=True,
                      include_name=include_name, compare_type=True)
    with context.begin_transaction():
        context.run_migrations()


run()
