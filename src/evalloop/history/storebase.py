"""What every part of the history store shares: its database (engine, read sessions, clock) and
the rule that a database error in any public method comes out as one StoreError line.

:class:`~evalloop.history.store.HistoryStore` is :class:`StoreBase` with the run writes
(:mod:`~evalloop.history.writes`), the run reads (:mod:`~evalloop.history.runreads`), the baseline
queries (:mod:`~evalloop.history.baselines`) and the case reads (:mod:`~evalloop.history.casereads`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Concatenate, ParamSpec, Protocol, TypeVar

from sqlalchemy import Table, func
from sqlmodel import Session, select

from evalloop.errors import EvalloopError, is_db_error, store_error
from evalloop.history.engine import get_engine, recovery_hint, store_where
from evalloop.history.models import TableModel, utcnow
from evalloop.history.outage import Backlog

P = ParamSpec("P")
R = TypeVar("R")


class HasUrl(Protocol):
    """A store: what :func:`mapped` reads of a function's first argument."""

    @property
    def url(self) -> str: ...


S = TypeVar("S", bound=HasUrl)


def mapped(fn: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
    """Turn a database error raised inside the function into one StoreError line naming the
    database (its URL redacted: the first argument's ``url``), what is wrong, and how to recover."""

    @functools.wraps(fn)
    def inner(store: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(store, *args, **kwargs)
        except EvalloopError:
            raise
        except Exception as exc:
            if not is_db_error(exc):
                raise
            raise store_error(exc, store="history database", where=store_where(store.url),
                              recover=recovery_hint(store.url)) from None

    return inner


class _MappedErrors(type):
    """Every public method of the class maps database errors to one StoreError line."""

    def __new__(mcs, name: str, bases: tuple[type, ...], ns: dict[str, object]) -> type:
        for key, value in list(ns.items()):
            if callable(value) and not key.startswith("_"):
                ns[key] = mapped(value)
        return super().__new__(mcs, name, bases, ns)


class StoreBase(metaclass=_MappedErrors):
    """One history database: its URL, engine, the case results kept while it is away, and its clock."""

    def __init__(self, url: str, *, readonly: bool = False) -> None:
        self.url = url
        self.readonly = readonly
        self.backlog = Backlog()  # case results kept while the database is away (history/outage.py)
        if readonly:
            from evalloop.history.readonly import readonly_engine

            self.engine = readonly_engine(url)
        else:
            self.engine = get_engine(url)

    def _reading(self) -> Session:
        """A session for reads: the models it returns stay readable once it is closed."""
        return Session(self.engine, expire_on_commit=False)

    def now(self, default: datetime | None = None) -> datetime:
        """The time a run is stamped with: on a server database (a team's history) the
        database's clock, so that no host's clock orders runs, picks baselines or decides
        which run is the latest; on SQLite (one host writes it) ``default`` or this host's."""
        if self.engine.dialect.name == "sqlite":
            return default or utcnow()
        from evalloop.history.locks import database_time

        return datetime.fromtimestamp(database_time(self.engine), UTC)

    def count(self, table: type[TableModel] | Table) -> int:  # type: ignore[explicit-any]  # SQLAlchemy 2.1's Table defaults its columns to Column[Any]
        """How many rows a history table holds."""
        target = table if isinstance(table, Table) else table.__table__
        with self.engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(target)).scalar_one())

