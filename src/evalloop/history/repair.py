"""``evalloop doctor --repair``: put each damaged store right, keeping every damaged file.

A damaged SQLite history database is moved aside (with its ``-wal``/``-shm`` files, which
would otherwise be replayed into the new one) and rebuilt from the committed run logs; a run
log's partial last line is cut off; a damaged memory store or LLM cache is moved aside (a new
one is made when first needed). Nothing is deleted: a moved file keeps its name plus
``.broken-<UTC time>``. A server database, or a run log line damaged mid-file, is left to the
user (the check says how).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel

from evalloop.config import Settings
from evalloop.history.health import Check


class Repair(BaseModel):
    """What was done to one store (``done`` False: it could not be repaired here)."""

    store: str
    where: str
    action: str
    done: bool = True

    def line(self) -> str:
        return f"{'repaired' if self.done else 'left as is'}: {self.store} {self.where}: {self.action}"


def move_aside(path: Path) -> Path:
    """Rename a SQLite file and its ``-wal``/``-shm`` companions to ``<name>.broken-<time>``."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    target = path.with_name(f"{path.name}.broken-{stamp}")
    for suffix in ("", "-wal", "-shm", "-journal"):
        companion = path.with_name(path.name + suffix)
        if companion.exists():
            companion.rename(target.with_name(target.name + suffix))
    return target


def repair(settings: Settings, checks: list[Check]) -> list[Repair]:
    """Repair the damaged stores among ``checks``: run logs first (the rebuild reads them)."""
    from evalloop.history import runlog

    done: list[Repair] = []
    for check in checks:
        if check.ok or check.store != "run log":
            continue
        path = Path(check.where)
        if "partial last line" in check.detail:
            action = runlog.mend_log(path) or "nothing to cut"
            done.append(Repair(store=check.store, where=check.where, action=action.split(": ", 1)[-1]))
        else:
            done.append(Repair(store=check.store, where=check.where, done=False,
                               action=f"{check.detail} — {check.recover}"))
    for check in checks:
        if check.ok or check.store == "run log":
            continue
        if check.store == "history database":
            done.append(_rebuild_history(settings, check))
        elif check.store in ("memory store", "LLM cache") and check.state == "damaged":
            moved = move_aside(Path(check.where))
            done.append(Repair(store=check.store, where=check.where,
                               action=f"moved aside to {moved.name}; a new one is made when first needed"))
    return done


def _rebuild_history(settings: Settings, check: Check) -> Repair:
    from sqlalchemy.engine import make_url

    from evalloop.history import runlog
    from evalloop.history.store import HistoryStore

    url = settings.database_url
    parsed = make_url(url)
    if check.state != "damaged" or parsed.get_backend_name() != "sqlite" or not parsed.database:
        return Repair(store=check.store, where=check.where, done=False,
                      action=f"{check.state}: {check.recover or 'check history_url and the server'}")
    moved = move_aside(Path(parsed.database))
    counts = runlog.import_logs(HistoryStore(url), settings.history_dir)
    total = sum(counts.values())
    per_suite = ", ".join(f"{suite} {n}" for suite, n in sorted(counts.items()))
    return Repair(store=check.store, where=check.where,
                  action=f"moved aside to {moved.name}; rebuilt from the run logs: {total} run(s)"
                         + (f" ({per_suite})" if per_suite else "")
                         + " — outputs and runs that were not completed are only in the moved file")
