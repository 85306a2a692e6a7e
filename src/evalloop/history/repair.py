"""``evalloop doctor --repair``: put each damaged store right, keeping every damaged file and
every schedule and memory that can still be read.

:func:`plan` says what would be done, and what would be kept, before anything is touched (the
CLI shows it and asks); :func:`repair` does it. Only a *damaged* store (the file is corrupt) is
ever moved: a store this process cannot open (ownership, mode, a read-only mount, a lock) is left
exactly as it is, with the fix. A damaged SQLite history database is rebuilt beside itself
from the committed run logs, given back the schedules, schedule fire records and calibrations
that can still be read from it, verified, and swapped in (:mod:`evalloop.history.swap`: a kill at
any step leaves the damaged file or the verified new one, never less); a damaged memory store
is rebuilt the same way from every memory that can still be read (same ids, tags, metadata and
times); a damaged LLM cache is moved
aside; a run log's partial last line is cut off. Nothing is deleted: a moved file keeps its name
plus ``.broken-<UTC time>``. A server database, or a run log line damaged mid-file, is left to
the user (the check says how).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel

from evalloop.config import Settings
from evalloop.history.health import Check


class Repair(BaseModel):
    """What was (or, in a plan, will be) done to one store (``done`` False: left as it is)."""

    store: str
    where: str
    action: str
    done: bool = True

    def line(self) -> str:
        return f"{'repaired' if self.done else 'left as is'}: {self.store} {self.where}: {self.action}"

    def planned(self) -> str:
        return f"{'will repair' if self.done else 'will leave as is'}: {self.store} {self.where}: {self.action}"


def move_aside(path: Path) -> Path:
    """Rename a SQLite file and its ``-wal``/``-shm`` companions to ``<name>.broken-<time>``."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    target = path.with_name(f"{path.name}.broken-{stamp}")
    for suffix in ("", "-wal", "-shm", "-journal"):
        companion = path.with_name(path.name + suffix)
        if companion.exists():
            companion.rename(target.with_name(target.name + suffix))
    return target


def _history_file(settings: Settings, check: Check) -> Path | None:
    """The SQLite history file a damaged check names (None: not a file evalloop may rebuild)."""
    from sqlalchemy.engine import make_url

    parsed = make_url(settings.database_url)
    if check.state != "damaged" or parsed.get_backend_name() != "sqlite" or not parsed.database:
        return None
    return Path(parsed.database)


def plan(settings: Settings, checks: list[Check], *, act: bool = False) -> list[Repair]:
    """What ``--repair`` does to each store that is not ok (``act``: do it), run logs first
    (the rebuild reads them). Nothing changes on disk unless ``act``."""
    from evalloop.history import runlog

    steps: list[Repair] = []
    for check in checks:
        if check.ok or check.store != "run log":
            continue
        if check.state == "damaged" and "partial last line" in check.detail:
            action = (runlog.mend_log(Path(check.where)) or "nothing to cut").split(": ", 1)[-1] if act \
                else "cut off the partial last line (the good runs before it stay)"
            steps.append(Repair(store=check.store, where=check.where, action=action))
        else:
            steps.append(Repair(store=check.store, where=check.where, done=False,
                                action=f"{check.state}: {check.detail} — {check.recover}"))
    for check in checks:
        if check.ok or check.store == "run log":
            continue
        if check.store == "history database":
            steps.append(_history(settings, check, act))
        elif check.store == "memory store" and check.state == "damaged":
            steps.append(_memories(Path(check.where), check, act))
        elif check.store == "LLM cache" and check.state == "damaged":
            action = (f"moved aside to {move_aside(Path(check.where)).name}" if act else "move it aside") \
                + "; a new one is made when first needed (it is only a cache)"
            steps.append(Repair(store=check.store, where=check.where, action=action))
        else:
            steps.append(Repair(store=check.store, where=check.where, done=False,
                                action=f"{check.state}: {check.detail} — {check.recover}"))
    return steps


def finish_interrupted(settings: Settings) -> list[Repair]:
    """Undo or finish each repair a kill left midway (:func:`evalloop.history.swap.finish_interrupted`),
    before anything is checked: the history database and the memory store."""
    from sqlalchemy.engine import make_url

    from evalloop.history.swap import finish_interrupted as finish

    files = [("memory store", settings.memory_file)]
    parsed = make_url(settings.database_url)
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        files.insert(0, ("history database", Path(parsed.database)))
    done = []
    for store, path in files:
        said = finish(path)
        if said is not None:
            done.append(Repair(store=store, where=str(path), action=said))
    return done


def repair(settings: Settings, checks: list[Check]) -> list[Repair]:
    """Repair the damaged stores among ``checks`` as :func:`plan` says."""
    return plan(settings, checks, act=True)


def _history(settings: Settings, check: Check, act: bool) -> Repair:
    from evalloop.history import runlog
    from evalloop.history.engine import forget
    from evalloop.history.salvage import carry_over, history_keepers
    from evalloop.history.store import HistoryStore
    from evalloop.history.swap import replace_verified, sqlite_verdict

    path = _history_file(settings, check)
    if path is None:
        return Repair(store=check.store, where=check.where, done=False,
                      action=f"{check.state}: {check.recover or 'check history_url and the server'}")
    keepers = history_keepers(path)
    kept = ", ".join(k.said() for k in keepers if k.rows or k.lost) or "nothing else to keep"
    if not act:
        logs = runlog.log_suites(settings.history_dir)
        return Repair(store=check.store, where=check.where,
                      action=f"move it aside (to {path.name}.broken-<time>), rebuild it from {len(logs)} "
                             f"run log(s), and keep from the damaged file: {kept}")
    counts: dict[str, int] = {}
    held: dict[str, int] = {}

    def build(new: Path) -> None:
        url = f"sqlite:///{new}"
        try:
            counts.update(runlog.import_logs(HistoryStore(url), settings.history_dir))
        finally:
            forget(url)  # every connection closed: no -wal stays beside the new file
        held.update(carry_over(keepers, new))

    moved = replace_verified(path, build, lambda new: sqlite_verdict(new, {"runs": sum(counts.values()), **held}))
    total = sum(counts.values())
    per_suite = ", ".join(f"{suite} {n}" for suite, n in sorted(counts.items()))
    return Repair(store=check.store, where=check.where,
                  action=f"moved aside to {moved.name}; rebuilt from the run logs: {total} run(s)"
                         + (f" ({per_suite})" if per_suite else "") + f"; kept {kept}"
                         + " — outputs and runs that were not completed are only in the moved file")


def _memories(path: Path, check: Check, act: bool) -> Repair:
    from evalloop.history.salvage import readable_memories, restore_memories

    memories, meta, lost = readable_memories(path)
    noun = "memory" if len(memories) == 1 else "memories"
    gone = "" if not lost else (" (the rest cannot be read" if lost < 0 else f" ({lost} cannot be read") \
        + ": only in the moved file)"
    if not act:
        return Repair(store=check.store, where=check.where,
                      action=f"move it aside (to {path.name}.broken-<time>) and copy the {len(memories)} "
                             f"{noun} it can still read into a new store{gone}")
    from evalloop.history.swap import replace_verified, sqlite_verdict

    kept: list[int] = []

    def build(new: Path) -> None:
        kept.append(restore_memories(new, memories, meta) if memories else 0)
        if not memories:
            from evalloop.memory.store import MemoryStore

            MemoryStore(new).close()  # an empty store, so that the swap leaves a usable file

    moved = replace_verified(path, build, lambda new: sqlite_verdict(new, {"memories": kept[0]}))
    n = kept[0]
    return Repair(store=check.store, where=check.where,
                  action=f"moved aside to {moved.name}; kept {n} {noun} in a new store{gone}")
