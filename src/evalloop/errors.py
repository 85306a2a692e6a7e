"""The errors a user can cause, each rendered as one line: what, where, and how to mend it."""

from __future__ import annotations

from evalloop.redact import redact_text


class EvalloopError(Exception):
    """An error caused by user input or environment; the CLI prints it as one line.

    ``where`` names the file (and line or case) or the component; ``hint`` says how to fix it.
    ``exit_code`` is 2 for usage and input errors, 1 for runtime failures the user must act on.
    """

    exit_code: int = 2

    def __init__(self, what: str, *, where: str | None = None, hint: str | None = None) -> None:
        # a URL's credentials never enter a message (it may be shown, logged or stored)
        self.what = redact_text(what)
        self.where = redact_text(where) if where else where
        self.hint = redact_text(hint) if hint else hint
        super().__init__(self.one_line())

    def one_line(self) -> str:
        parts = [f"{self.where}: {self.what}" if self.where else self.what]
        if self.hint:
            parts.append(self.hint)
        return redact_text(" — ".join(parts).replace("\n", " "))


class FixtureError(EvalloopError):
    """A suite or case file that cannot be loaded or validated."""


class UnknownSuiteError(FixtureError):
    """No suite of that name here (not a broken one: its file is absent from this checkout)."""


class ScorerError(EvalloopError):
    """An unknown scorer, bad scorer parameters, or a registry clash."""


class TargetError(EvalloopError):
    """A target that cannot be resolved or called."""


class ConfigError(EvalloopError):
    """Bad settings, or a missing key or service the chosen configuration needs."""


class ConnectionFailed(EvalloopError):
    """A server (LLM API, memory service, webhook) that cannot be reached."""

    exit_code = 1


class ReplayMiss(EvalloopError):
    """A cache-only (replay) run asked for a response that is not cached."""

    exit_code = 1


class StoreError(EvalloopError):
    """A store (history database, run log, memory store, LLM cache) that is damaged, locked or
    unreachable; the line names the file, what is wrong, and how to recover. An environment
    error (exit 2), never a verdict: exit 1 is only for a run that fails its verdict."""

    exit_code = 2


class DiskFullError(StoreError):
    """No space left where a store lives: the store is not damaged, and nothing may move or
    rebuild it; free space and run again (exit 2)."""


class StoreAccessError(StoreError):
    """A store this process may not open or write (ownership, permissions, a read-only mount):
    an environment error (exit 2). The store is not damaged, and nothing may move or rebuild it."""

    exit_code = 2


def access_error(path: object, *, store: str, write: bool = True, detail: str = "") -> StoreAccessError | None:
    """The one line for a store's file this process cannot open (None when nothing is in the way)."""
    from pathlib import Path

    from evalloop.access import diagnose

    problem = diagnose(Path(str(path)), write=write)
    if problem is None:
        return None
    verb = "write" if problem.readable else "open"
    return StoreAccessError(f"cannot {verb} the {store}: {problem.what}" + (f" ({detail})" if detail else ""),
                            where=str(path), hint=problem.fix)


#: message fragments of database errors that a concurrent creator of the same schema causes
RACE_MARKERS = ("already exists", "duplicate column", "duplicate key value", "database is locked",
                "deadlock detected", "could not serialize", "database table is locked")
_DAMAGE_MARKERS = ("file is not a database", "malformed", "disk image", "not a database",
                   "file is encrypted", "database corrupt", "unsupported file format")


def is_db_error(exc: BaseException) -> bool:
    """A database error of any driver evalloop uses (SQLAlchemy, sqlite3, sqlean, psycopg)."""
    from sqlalchemy.exc import DBAPIError

    # only errors the database (or its driver) raised: SQLAlchemy's own usage errors
    # (InvalidRequestError, ArgumentError …) are bugs, and a store message would hide them
    if isinstance(exc, DBAPIError):
        return True
    module = type(exc).__module__ or ""
    names = {c.__name__ for c in type(exc).__mro__}
    return bool({"DatabaseError", "Error"} & names) and module.split(".")[0] in (
        "sqlite3", "sqlean", "pysqlite3", "psycopg", "psycopg2", "_sqlite3")


def is_damage(message: str) -> bool:
    """Whether a database message says the file itself is corrupt (not locked, not refused)."""
    low = message.lower()
    return any(m in low for m in _DAMAGE_MARKERS)


def out_of_space(exc: BaseException, message: str, where: str | None) -> bool:
    """Whether a database error is a full disk: SQLite says so (``SQLITE_FULL``, "disk is
    full"), or it says "disk I/O error" where the store's file system has no space left."""
    orig = getattr(exc, "orig", None) or exc
    name = str(getattr(orig, "sqlite_errorname", "") or "")
    low = message.lower()
    if name == "SQLITE_FULL" or "disk is full" in low or "no space left" in low:
        return True
    if (name.startswith("SQLITE_IOERR") or "disk i/o error" in low) and where and "://" not in where:
        from pathlib import Path

        from evalloop.access import out_of_space as full

        return full(Path(where))
    return False


def db_message(exc: BaseException) -> str:
    """The driver's own words for a database error (SQLAlchemy's wrapper and SQL left out)."""
    orig = getattr(exc, "orig", None) or exc
    text = str(orig).strip().splitlines()[0] if str(orig).strip() else type(orig).__name__
    return text


def store_error(exc: BaseException, *, store: str, where: str | None,
                recover: str = "run `evalloop doctor`") -> StoreError:
    """One line for a database error of a store: what is wrong, and how to recover.

    The cause is named from the driver's message: a damaged file, a lock held too long, a
    schema another process was creating, a missing file or permission, an unreachable server.
    """
    message = db_message(exc)
    low = message.lower()
    if out_of_space(exc, message, where):
        from pathlib import Path

        from evalloop.access import space_advice

        path = Path(where) if where and "://" not in where else None
        return DiskFullError(redact_text(f"no space left on the disk of the {store} ({message})"),
                             where=redact_text(where) if where else None, hint=space_advice(path))
    if is_damage(message):
        what, hint = f"the {store} is damaged ({message})", recover
    elif "locked" in low:
        what, hint = (f"the {store} stayed locked by another process ({message})",
                      "wait for the other evalloop process (or stop it) and try again")
    elif any(m in low for m in RACE_MARKERS):
        what, hint = (f"the {store}'s tables were being changed by another process ({message})",
                      "try again; if it persists, run `evalloop doctor`")
    elif "unable to open" in low or "permission" in low or "readonly" in low or "read-only" in low:
        found = access_error(where, store=store, detail=message) if where and "://" not in where else None
        return found or StoreAccessError(
            redact_text(f"cannot open the {store} ({message})"), where=redact_text(where) if where else None,
            hint="check that the path exists and this user may read and write it")
    elif "connection" in low or "could not connect" in low or "timeout" in low or "refused" in low:
        what, hint = (f"cannot reach the {store} ({message})",
                      "check the URL, the server, and the network")
    elif "no such table" in low or "does not exist" in low or "no such column" in low:
        what, hint = (f"the {store} lacks part of evalloop's schema ({message})",
                      "it was made by another program or an older evalloop: run `evalloop doctor`, "
                      "or point history_url at a new database")
    else:
        what, hint = f"the {store} failed: {type(getattr(exc, 'orig', None) or exc).__name__}: {message}", recover
    return StoreError(redact_text(what), where=redact_text(where) if where else None, hint=hint)


MEMORY_RECOVER = ("learning from failures is skipped until it is mended: `evalloop doctor --repair` moves the "
                  "file aside (a new store is made on the next regression)")
CACHE_RECOVER = "caching is skipped: `evalloop doctor --repair` moves the file aside (it is only a cache)"
