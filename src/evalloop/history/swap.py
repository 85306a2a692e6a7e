"""Replacing a damaged SQLite file with a rebuilt one so that a kill at any step loses nothing.

The rebuilt database is made *beside* the damaged one (``<name>.repair-new``) and verified; only
then is it swapped in. The swap keeps the damaged file first — hard links named
``<name>.broken-<time>`` (and its ``-wal``/``-shm``), so its bytes are never out of reach — then
removes the damaged file's companions (a ``-wal`` left beside the new file would be replayed into
it) and renames the new file over the damaged one in one atomic step. A journal
(``<name>.repair.json``, written atomically) records the step reached:

| step         | on disk                                          | an interrupted repair is  |
|--------------|--------------------------------------------------|---------------------------|
| `building`   | the damaged file in place; a partial new one     | undone: the new file gone |
| `verified`   | the damaged file in place; a verified new one    | finished: kept, swapped   |
| `kept`       | the damaged file linked aside; companions gone   | finished: swapped         |
| (no journal) | the new file in place (or no repair ever began)  | nothing to do             |

:func:`finish_interrupted` does what the last column says; ``evalloop doctor`` calls it first and
says which it was. A verified new file is the user's approved repair, so finishing it needs no
second yes; a new file that was never verified is never swapped in.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel

from evalloop.errors import EvalloopError
from evalloop.faults import point

COMPANIONS = ("-wal", "-shm", "-journal")
#: where a repair can be killed (``EVALLOOP_FAULT``), in order
KILL_POINTS = ("repair.building", "repair.built", "repair.verified", "repair.linked", "repair.kept",
               "repair.swapped")


class RepairFailed(EvalloopError):
    """The rebuilt file did not pass its verification: nothing was swapped."""

    exit_code = 1


class Journal(BaseModel):
    """What an interrupted repair of one file had reached."""

    target: str
    new: str
    aside: str
    step: str  # building | verified | kept


def journal_path(target: Path) -> Path:
    return target.with_name(target.name + ".repair.json")


def new_path(target: Path) -> Path:
    return target.with_name(target.name + ".repair-new")


def aside_path(target: Path) -> Path:
    """Where the damaged file is kept: ``<name>.broken-<UTC time>`` (a free name)."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    aside = target.with_name(f"{target.name}.broken-{stamp}")
    n = 1
    while aside.exists():
        n += 1
        aside = target.with_name(f"{target.name}.broken-{stamp}-{n}")
    return aside


def _sync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write(journal: Journal) -> None:
    """The journal, replaced atomically (a kill leaves the old step or the new one)."""
    path = journal_path(Path(journal.target))
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(journal.model_dump_json())
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _sync_dir(path.parent)


def _remove(path: Path) -> None:
    for suffix in ("", *COMPANIONS):
        path.with_name(path.name + suffix).unlink(missing_ok=True)


def _keep(target: Path, aside: Path) -> None:
    """Link the damaged file and its companions to ``aside`` names (idempotent), then drop the
    companions beside ``target`` so that none is replayed into the file swapped in."""
    for suffix in ("", *COMPANIONS):
        src, dst = target.with_name(target.name + suffix), aside.with_name(aside.name + suffix)
        if src.exists() and not dst.exists():
            os.link(src, dst)
    _sync_dir(target.parent)
    point("repair.linked")
    for suffix in COMPANIONS:
        target.with_name(target.name + suffix).unlink(missing_ok=True)


def _swap(journal: Journal) -> None:
    target, new = Path(journal.target), Path(journal.new)
    _keep(target, Path(journal.aside))
    journal.step = "kept"
    _write(journal)
    point("repair.kept")
    if new.exists():
        os.replace(new, target)
        _sync_dir(target.parent)
    point("repair.swapped")
    journal_path(target).unlink(missing_ok=True)


def replace_verified(target: Path, build: Callable[[Path], None], verify: Callable[[Path], str | None]) -> Path:
    """Build a new file with ``build(new)`` beside ``target``, check it with ``verify(new)``
    (None: good; else why not), and swap it in; the damaged file is kept at the path returned.
    ``build`` must close every connection it opened (no ``-wal`` may stay beside the new file)."""
    new = new_path(target)
    _remove(new)
    journal = Journal(target=str(target), new=str(new), aside=str(aside_path(target)), step="building")
    _write(journal)
    point("repair.building")
    build(new)
    point("repair.built")
    why = verify(new)
    if why is not None:
        _remove(new)
        journal_path(target).unlink(missing_ok=True)
        raise RepairFailed(f"the rebuilt file did not pass its check: {why}", where=str(target),
                           hint="nothing was changed; report this with the damaged file")
    journal.step = "verified"
    _write(journal)
    point("repair.verified")
    _swap(journal)
    return Path(journal.aside)


def finish_interrupted(target: Path) -> str | None:
    """Undo or finish a repair of ``target`` that was killed midway (see the module's table);
    what was done, in words, or None when no repair was interrupted."""
    path = journal_path(target)
    if not path.exists():
        return None
    try:
        journal = Journal.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return None  # not a journal this evalloop wrote: left alone, and said by nobody
    if journal.step == "building":
        _remove(Path(journal.new))
        path.unlink(missing_ok=True)
        return ("a repair was stopped before its new file was verified: undone — the damaged file is "
                "in place as it was (run `evalloop doctor --repair` again)")
    _swap(journal)
    return (f"a repair was stopped after its new file was verified: finished — the rebuilt file is "
            f"in place, the damaged one kept as {Path(journal.aside).name}")


def sqlite_verdict(path: Path, counts: dict[str, int]) -> str | None:
    """Whether ``path`` passes SQLite's integrity check and holds at least ``counts`` rows per
    table (None: it does; else what is wrong). Leaves no ``-wal`` behind."""
    import sqlite3

    conn = sqlite3.connect(path, timeout=30)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        found = conn.execute("PRAGMA integrity_check").fetchone()[0]
        if found != "ok":
            return f"integrity check: {found}"
        for table, expected in counts.items():
            have = conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]
            if have < expected:
                return f"{table} holds {have} rows, {expected} expected"
    except sqlite3.DatabaseError as exc:
        return str(exc)
    finally:
        conn.close()
    return None
