"""The run log: a compact, append-only ``history/<suite>.jsonl`` a project commits beside its code.

One line per completed run: its metadata, per-scorer summary and per-case scores (no outputs);
a bridge (earlier outputs re-graded by a changed measurement, :mod:`evalloop.history.bridges`)
is a line too, so a clone's baseline under the new measurement is the team's.
A fresh clone with an empty database reads the runs it lacks from the log (``origin="log"``),
so its rolling baseline is the one the team saw. Lines are independent and keyed by run id, so
importing twice changes nothing, and ``merge=union`` in ``.gitattributes`` merges logs cleanly.
"""

from __future__ import annotations

import itertools
import json
import logging
import re
import secrets
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from pydantic import BaseModel, ConfigDict, PrivateAttr, ValidationError
from sqlalchemy import insert, select
from sqlalchemy.exc import IntegrityError

from evalloop.errors import EvalloopError
from evalloop.history import acceptance, identity, linefile
from evalloop.history.details import JSONValue, json_object, run_fingerprint, summary_details
from evalloop.history.models import Run, RunStatus, ScorerSummary
from evalloop.history.store import RUNS, SCORES, HistoryStore, dumps, mapped
from evalloop.redact import redact_text
from evalloop.score import fails_many, passes

FORMAT_VERSION = 1
MESSAGE_CHARS = 300
log = logging.getLogger("evalloop.runlog")
_ID = re.compile(r'"id"\s*:\s*"([^"]+)"')
_RUN_SKIP = {"notes", "origin", "fingerprint"}
_SUMMARY_SKIP = {"id", "run_id", "scorer", "details", "accepted"}  # an acceptance travels as its own line


if TYPE_CHECKING:  # numpy is imported where a vector is read (not by every process that logs)
    import numpy as np
    import numpy.typing as npt


class GradedVector(Protocol):
    """What the run log reads of one scorer's grades held in memory (the runner's ``ScorerResult``)."""

    @property
    def ids(self) -> Sequence[str]: ...
    @property
    def vector(self) -> object: ...  # per-case scores in ``ids`` order (a numpy float64 array)
    @property
    def errored_ids(self) -> Iterable[str]: ...


class RunLogError(EvalloopError):
    """A run log line that cannot be read (often a merge conflict left in the file)."""


class LoggedScorer(BaseModel):
    """One scorer of a logged run: its summary columns and per-case scores."""

    model_config = ConfigDict(extra="allow")

    kind: str
    mean: float | None = None
    n: int = 0
    details: dict[str, JSONValue] = {}
    cases: dict[str, float] = {}
    errored_cases: list[str] = []
    messages: dict[str, str] = {}


class LoggedRun(BaseModel):
    """One line of the run log. Run columns travel as extra fields, so new columns travel too."""

    model_config = ConfigDict(extra="allow")

    v: int = FORMAT_VERSION
    id: str
    suite: str
    started_at: datetime
    fingerprint: dict[str, JSONValue] = {}
    scorers: dict[str, LoggedScorer] = {}


def log_path(history_dir: Path, suite: str) -> Path:
    """``history/<suite>.jsonl`` (path separators in a suite name become '_')."""
    safe = re.sub(r"[\\/:\0]", "_", suite)
    return Path(history_dir) / f"{safe}.jsonl"


def _utc(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


# -- writing ------------------------------------------------------------------------------
class _Streamed(LoggedScorer):
    """A logged scorer whose per-case scores stay a vector until its line is written."""

    _ids: Sequence[str] = PrivateAttr(default=())
    _values: npt.NDArray[np.float64] | None = PrivateAttr(default=None)


def _from_results(store: HistoryStore, run: Run, summaries: dict[str, ScorerSummary],
                  results: Mapping[str, GradedVector]) -> dict[str, LoggedScorer]:
    """The logged scorers of a run from the runner's results (score vectors held in memory):
    only the failing cases' messages are read back."""
    import numpy as np

    scorers: dict[str, LoggedScorer] = {}
    for name, summary in summaries.items():
        result = results[name]
        details, pass_mark = json_object(summary.details), summary_details(summary).pass_mark
        values = np.asarray(result.vector, dtype=np.float64)
        failing = [result.ids[int(i)] for i in np.flatnonzero(fails_many(values, pass_mark))]
        messages = _first_messages(store, run.id, name, failing)
        logged = _Streamed(**summary.model_dump(mode="json", exclude=_SUMMARY_SKIP), details=details,
                           errored_cases=sorted(result.errored_ids),
                           messages={c: messages[c][:MESSAGE_CHARS] for c in sorted(messages)})
        logged._ids, logged._values = result.ids, values
        scorers[name] = logged
    return scorers


def _first_messages(store: HistoryStore, run_id: str, scorer: str, case_ids: list[str]) -> dict[str, str]:
    """The first non-empty message of each case (skipped grades left out), in chunks."""
    found: dict[str, str] = {}
    for start in range(0, len(case_ids), 500):
        with store.engine.connect() as conn:
            rows = conn.execute(
                select(SCORES.c.case_id, SCORES.c.message)
                .where(SCORES.c.run_id == run_id, SCORES.c.scorer == scorer,
                       SCORES.c.skipped.is_(False), SCORES.c.message != "",
                       SCORES.c.case_id.in_(case_ids[start:start + 500]))
                .order_by(SCORES.c.id)).all()
        for case_id, message in rows:
            if message:
                found.setdefault(case_id, message)
    return found


@mapped
def entry_for(store: HistoryStore, run: Run, results: Mapping[str, GradedVector] | None = None) -> LoggedRun:
    """The log line of a stored run (``results``: the runner's, so its scores need no reading back)."""
    summaries = store.summaries(run.id)
    if results is not None and set(summaries) <= set(results):
        return _entry(run, _from_results(store, run, summaries, results))
    with store.engine.connect() as conn:
        rows = conn.execute(
            select(SCORES.c.case_id, SCORES.c.scorer, SCORES.c.value, SCORES.c.errored,
                   SCORES.c.skipped, SCORES.c.message)
            .where(SCORES.c.run_id == run.id).order_by(SCORES.c.id)).all()
    graded: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    errored: dict[str, set[str]] = defaultdict(set)
    first_message: dict[tuple[str, str], str] = {}
    for case_id, scorer, value, is_errored, is_skipped, message in rows:
        if is_skipped:
            continue
        if is_errored:
            errored[scorer].add(case_id)
        else:
            graded[scorer][case_id].append(value)
        if message:
            first_message.setdefault((scorer, case_id), message)
    scorers: dict[str, LoggedScorer] = {}
    for name, summary in summaries.items():
        details, pass_mark = json_object(summary.details), summary_details(summary).pass_mark
        cases = {c: sum(v) / len(v) for c, v in graded[name].items()}
        scorers[name] = LoggedScorer(
            **summary.model_dump(mode="json", exclude=_SUMMARY_SKIP), details=details,
            cases=cases, errored_cases=sorted(errored[name] - cases.keys()),
            messages={c: first_message[(name, c)][:MESSAGE_CHARS] for c in sorted(cases)
                      if not passes(cases[c], pass_mark) and (name, c) in first_message},
        )
    return _entry(run, scorers)


def _entry(run: Run, scorers: Mapping[str, LoggedScorer]) -> LoggedRun:
    dumped = run.model_dump(mode="json", exclude=_RUN_SKIP)
    # in the model's field order: a run loaded by a session dumps its fields in the order the ORM
    # filled them, and one line must read the same whoever loaded the run
    data = {name: dumped[name] for name in Run.model_fields if name in dumped}
    data["started_at"] = _utc(run.started_at)
    data["ended_at"] = ended.isoformat() if (ended := _utc(run.ended_at)) else None
    entry = LoggedRun(**data, fingerprint=run_fingerprint(run))
    entry.scorers = dict(scorers)  # as built: a streamed scorer keeps its vector
    return entry


def _line_parts(entry: LoggedRun) -> Iterator[bytes]:
    """One log line as UTF-8 pieces, the per-case scores in chunks of cases: a 100,000-case run's
    2 MB line is written piece by piece, never built whole (nor copied by replace/redact/encode)."""
    head = {"v": entry.v, "id": entry.id}
    body = entry.model_dump(mode="json", exclude={"v", "id"})
    streamed = {name: s for name, s in entry.scorers.items() if isinstance(s, _Streamed)}
    marks = {}
    for name in streamed:  # each vector goes into the line as JSON text, never as a dict
        marks[name] = f"\x01cases-{secrets.token_hex(8)}\x01"
        body["scorers"][name]["cases"] = marks[name]
    rest = dumps({**head, **body})
    for name, scorer in streamed.items():
        before, rest = rest.split(dumps(marks[name]), 1)
        yield redact_text(before).encode("utf-8")
        assert scorer._values is not None  # set with its ids when the scorer was built
        yield from _cases_json(scorer._ids, scorer._values)
    yield (redact_text(rest) + "\n").encode("utf-8")


def _line(entry: LoggedRun) -> bytes:
    """One whole log line (see :func:`_line_parts`)."""
    return b"".join(_line_parts(entry))


def _cases_json(ids: Sequence[str], values: npt.NDArray[np.float64]) -> Iterator[bytes]:
    """``{"case": score, …}`` of a vector's graded cases, as ``dumps`` writes it, in chunks of
    512 cases (each redacted on its own: an id never spans two chunks)."""
    import numpy as np

    yield b"{"
    sep = ""
    for start in range(0, len(values), 512):
        block = values[start:start + 512]
        rows = np.flatnonzero(~np.isnan(block))
        if not len(rows):
            continue
        graded = dict(zip([ids[start + i] for i in rows.tolist()], block[rows].tolist(), strict=True))
        if len(graded) == len(rows):  # one C call for the chunk (float repr as below, ids as dumps)
            text = dumps(graded)[1:-1]
        else:  # a repeated id: every pair written, as before
            text = ",".join(f"{dumps(ids[start + int(i)])}:{float(v)!r}"
                            for i, v in zip(rows, block[rows].tolist(), strict=True))
        yield (sep + redact_text(text)).encode("utf-8")
        sep = ","
    yield b"}"


class RunLogWriteError(RunLogError, OSError):
    """A run log append that did not complete (full disk, file size limit); nothing was kept."""

    exit_code = 1


def _append(path: Path, parts: Iterable[bytes], notices: list[str] | None = None) -> None:
    """Append run-log lines all or nothing (see :func:`linefile.append`); a failure is a
    :class:`RunLogWriteError` naming the file and how to recover."""
    try:
        linefile.append(path, parts, _is_entry, notices)
    except linefile.AppendFailed as exc:
        raise RunLogWriteError(
            f"the run's line was not appended ({exc.strerror}; {exc.written} bytes went out "
            "and were rolled back)", where=str(path),
            hint="the run is in the database: free space, then `evalloop history export` adds it") from None


def mend_log(path: Path) -> str | None:
    """Cut a partial last line off a run log (``evalloop doctor --repair``); what was done, or None."""
    return linefile.mend(path, _is_entry)


def _is_entry(raw: bytes) -> bool:
    try:
        LoggedRun.model_validate_json(raw)
    except (ValidationError, ValueError):
        return False
    return True


def append_run(store: HistoryStore, history_dir: Path, run_id: str,
               notices: list[str] | None = None, results: Mapping[str, GradedVector] | None = None) -> Path | None:
    """Append a completed run to its suite's log; runs read from a log are not written back.

    ``results`` (scorer → the runner's result, with its score vector) spares reading the run's
    scores back. Raises :class:`RunLogWriteError` (an ``OSError`` too) when the line could not
    be written.
    """
    run = store.get_run(run_id)
    if run is None or run.status != RunStatus.COMPLETED or run.origin == "log":
        return None
    path = log_path(history_dir, run.suite)
    _append(path, _line_parts(entry_for(store, run, results)), notices)
    return path


def append_acceptance(history_dir: Path, found: acceptance.Acceptance) -> Path:
    """Append an acceptance to its suite's log (a line of its own, read back by :func:`sync_suite`)."""
    path = log_path(history_dir, found.suite)
    _append(path, [json.dumps(acceptance.log_line(found), ensure_ascii=False).encode() + b"\n"])
    return path


# -- reading ------------------------------------------------------------------------------
def _heads(path: Path) -> Iterator[tuple[int, str, int, int]]:
    """(line number, run id, start, end) of every non-blank line; a line without an id is an error.

    A last line without its newline is kept only when it is a whole entry (an interrupted append
    leaves a partial one, which the next append removes)."""
    for number, start, end, complete, head in linefile.spans(path):
        if not complete and not _is_entry(linefile.read_span(path, start, end).encode()):
            log.warning("%s:%d: skipped a partial last line (the next append removes it)", path, number)
            continue
        found = _ID.search(head.decode("utf-8", errors="replace"))
        if not found:
            raise _bad_line(path, number, "not a run log entry")
        yield number, found.group(1), start, end


def _lines(path: Path) -> Iterator[tuple[int, str, str]]:
    """(line number, run id, line) for every entry line (see :func:`_heads`)."""
    for number, run_id, start, end in _heads(path):
        yield number, run_id, linefile.read_span(path, start, end)


def _bad_line(path: Path, number: int, why: str) -> RunLogError:
    return RunLogError(f"cannot read run log line: {why}", where=f"{path}:{number}",
                       hint="resolve any merge conflict (every line is one run: keep both sides), "
                            "or delete the line")


def read_log(path: Path) -> Iterator[LoggedRun]:
    """Every entry of a log file, in file order."""
    for number, _, line in _lines(path):
        yield _parse(path, number, line)


def _parse(path: Path, number: int, line: str) -> LoggedRun:
    try:
        return LoggedRun.model_validate_json(line)
    except ValidationError as exc:
        from evalloop import validation

        raise _bad_line(path, number, validation.message(exc.errors(include_url=False)[0])) from None


def logged_ids(path: Path) -> set[str]:
    return {run_id for _, run_id, _, _ in _heads(path)} if path.is_file() else set()


@mapped
def _known_ids(store: HistoryStore, suite: str | None = None) -> set[str]:
    query = select(RUNS.c.id)
    if suite is not None:
        query = query.where(RUNS.c.suite == suite)
    with store.engine.connect() as conn:
        return set(conn.execute(query).scalars())


@mapped
def sync_suite(store: HistoryStore, history_dir: Path, suite: str) -> int:
    """Import the runs of one suite's log that the database lacks; returns how many."""
    path = log_path(history_dir, suite)
    if not path.is_file():
        return 0
    known = _known_ids(store)
    missing = [(n, start, end) for n, run_id, start, end in _heads(path) if run_id not in known]
    count = 0
    for number, start, end in missing:  # only the lines the database lacks are read whole
        entry = _parse(path, number, linefile.read_span(path, start, end))
        if entry.id in known:
            continue
        if entry.id.startswith(acceptance.PREFIX):  # an acceptance travels as its own line
            found = acceptance.from_log(entry.model_extra or {})
            if found is not None:
                acceptance.apply(store, found)
            continue
        count += _insert(store, entry)
        known.add(entry.id)
    return count


@mapped
def _insert(store: HistoryStore, entry: LoggedRun) -> int:
    """One logged run into the database, in one transaction; 0 when it is already there."""
    data = entry.model_dump(exclude={"v", "scorers", "fingerprint"})
    fields = {k: v for k, v in data.items() if k in Run.model_fields}
    for key in ("started_at", "ended_at"):
        if isinstance(fields.get(key), str):
            fields[key] = datetime.fromisoformat(fields[key])
        fields[key] = _utc(fields.get(key))
    run = Run.model_validate({**fields, "fingerprint": entry.fingerprint, "notes": {"origin": "log"}, "origin": "log"})
    scores: list[dict[str, object]] = []
    summaries = []
    for name, logged in entry.scorers.items():
        extra = logged.model_dump(exclude={"details", "cases", "errored_cases", "messages"})
        summaries.append(ScorerSummary.model_validate(
            {k: v for k, v in extra.items() if k in ScorerSummary.model_fields}
            | {"run_id": entry.id, "scorer": name, "details": logged.details,
               "accepted": True if isinstance(logged.details.get("accepted"), dict) else None}))
        for case_id, value in logged.cases.items():
            scores.append({"run_id": entry.id, "case_id": case_id, "epoch": 0, "scorer": name,
                           "value": value, "errored": False, "skipped": False,
                           "message": logged.messages.get(case_id, "")})
        for case_id in logged.errored_cases:
            scores.append({"run_id": entry.id, "case_id": case_id, "epoch": 0, "scorer": name,
                           "value": 0.0, "errored": True, "skipped": False, "message": "errored"})
    try:
        with store.engine.begin() as conn:
            conn.execute(insert(RUNS), run.model_dump())
            if summaries:
                conn.execute(insert(ScorerSummary.__table__), [s.model_dump(exclude={"id"}) for s in summaries])
            if scores:
                conn.execute(insert(SCORES), scores)
            if run.product_fingerprint is None:  # a line of an older evalloop: from its fingerprint
                identity.backfill(conn, [run.id])
    except IntegrityError:  # another process imported it first
        return 0
    return 1


def log_suites(history_dir: Path) -> list[str]:
    """Suites that have a log file, by file name."""
    return sorted(p.stem for p in Path(history_dir).glob("*.jsonl"))


def import_logs(store: HistoryStore, history_dir: Path,
                suites: Iterable[str] | None = None) -> dict[str, int]:
    """Import missing runs from the logs of the given suites (default: every log)."""
    names = list(suites) if suites is not None else log_suites(history_dir)
    return {name: sync_suite(store, history_dir, name) for name in names}


@mapped
def export_runs(store: HistoryStore, history_dir: Path,
                suites: Iterable[str] | None = None) -> dict[str, int]:
    """Append the database's completed runs that a log lacks (oldest first); returns counts."""
    names = list(suites) if suites is not None else store.suites()
    counts: dict[str, int] = {}
    for name in names:
        path = log_path(history_dir, name)
        present = logged_ids(path)
        runs = [r for r in reversed(store.runs(name, limit=None, statuses=[RunStatus.COMPLETED], bridges=True))
                if r.id not in present]
        if runs:
            _append(path, itertools.chain.from_iterable(_line_parts(entry_for(store, r)) for r in runs))
        counts[name] = len(runs)
    return counts


def _sqlite_file_missing(url: str) -> bool:
    """True for an SQLite URL whose database file does not exist yet."""
    from sqlalchemy.engine import make_url

    try:
        parsed = make_url(url)
    except Exception:  # noqa: BLE001 - HistoryStore reports a bad URL in one line
        return False
    return (parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:")
            and not Path(parsed.database).exists())


def synced_store(url: str, history_dir: Path, *, run_log: bool = True,
                 suites: Iterable[str] | None = None, create: bool = True) -> HistoryStore | None:
    """The history store, with the runs the committed logs hold and it lacks imported first.

    The logs are only read, as before a run. With ``create=False`` nothing is created where
    there is neither a database nor a log to read: the answer is None ("no history yet").
    """
    names = list(suites) if suites is not None else None
    has_logs = run_log and any(log_path(history_dir, n).is_file() for n in
                               (names if names is not None else log_suites(history_dir)))
    if not create and not has_logs and _sqlite_file_missing(url):
        return None
    from evalloop.history.readonly import cannot_write

    if cannot_write(url):  # a read-only mount: read what the database holds, write nothing
        return HistoryStore(url, readonly=True)
    store = HistoryStore(url)
    if run_log:
        import_logs(store, history_dir, names)
    return store
