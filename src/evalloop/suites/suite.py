"""A suite: a named set of cases, the target that answers them and the scorers that grade them,
with its settings; its cases read (once while unchanged), checked (schema, duplicate ids) and
split into held-out and learn parts."""

from __future__ import annotations

import operator
from array import array
from collections.abc import Iterable, Iterator
from functools import cached_property
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from evalloop.errors import FixtureError
from evalloop.suites.case import Case
from evalloop.suites.casesource import case_source, jsonl_cases
from evalloop.suites.holdout import Holdout
from evalloop.suites.refs import ScorerRef, TargetRef
from evalloop.suites.settings import EarlyStop, SuiteVerdict
from evalloop.suites.split import HELD_OUT, NearCheck, Split, input_digest, near_duplicates

#: a JSONL cases file up to this size keeps its cases from the check for the run (≈ 60,000 short
#: cases); a larger one is read again, as a stream, so memory stays flat as suites grow
KEEP_PARSED_BYTES = 4 * 1024 * 1024


class _SplitRow(NamedTuple):
    """What the split reads of a case, kept from the validating pass: its input as a digest."""

    id: str
    input: str
    group: str | None
    tags: tuple[str, ...]


class Suite(BaseModel):
    """A named set of cases, the target that answers them, and the scorers that grade them."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    description: str = ""
    target: TargetRef
    scorers: list[ScorerRef] = Field(min_length=1)
    thresholds: dict[str, float] = Field(default_factory=dict)
    concurrency: int | None = Field(default=None, ge=1, le=1024)
    epochs: int = Field(default=1, ge=1)
    timeout: float | None = Field(default=None, gt=0)
    target_threads: bool | None = None  # None: adaptive (run.placement); True: threads; False: in place
    window: int | None = Field(default=None, ge=1, le=100)
    verdict: SuiteVerdict = Field(default_factory=SuiteVerdict)
    max_cost: float | None = Field(default=None, gt=0)  # USD: the run stops starting LLM calls past it
    batch: bool = False  # send the run's LLM calls through the provider's batch API (half price)
    early_stop: EarlyStop | None = None  # judges stop once the verdict is settled (true: the defaults)
    holdout: Holdout = Field(default_factory=Holdout)
    ablation_every: int | None = Field(default=None, ge=0)  # else [learning] ablation_every (docs/incidents.md)
    cases: list[Case] | str | None = None
    dataset: str | None = None
    path: Path | None = None
    #: the last full validation, so a suite checked once is not read twice: the cases' stamp, their
    #: count, and a small JSONL file's cases (kept for the run; None for a larger file or inline
    #: cases)
    _checked: tuple[Any, int, list[Case] | None] | None = PrivateAttr(default=None)
    #: read only as far as its first N cases (``load_suite(path, limit=N)``): a run of it is partial
    _head_only: int | None = PrivateAttr(default=None)
    #: the last split (:meth:`split`) and what it was computed from
    _split: tuple[Any, Split] | None = PrivateAttr(default=None)
    #: the cases by id (:meth:`cases_by_id`) and what they were read from
    _by_id: tuple[Any, dict[str, Case]] | None = PrivateAttr(default=None)

    @field_validator("early_stop", mode="before")
    @classmethod
    def _early_stop_bool(cls, v: Any) -> Any:
        return ({} if v else None) if isinstance(v, bool) else v

    @field_validator("target", mode="before")
    @classmethod
    def _target_str(cls, v: Any) -> Any:
        return {"ref": v} if isinstance(v, str) else v

    @field_validator("scorers", mode="before")
    @classmethod
    def _scorer_str(cls, v: Any) -> Any:
        return [{"name": s} if isinstance(s, str) else s for s in v] if isinstance(v, list) else v

    @model_validator(mode="after")
    def _unique_scorers(self) -> Suite:
        if (self.cases is None) == (self.dataset is None):
            raise ValueError("give either 'cases' (inline or a JSONL file) or 'dataset' "
                             "(a folder with corpus.jsonl, queries.jsonl, qrels.jsonl)")
        counts: dict[str, int] = {}
        for ref in self.scorers:
            counts[ref.name] = counts.get(ref.name, 0) + 1
        for ref in self.scorers:
            if ref.alias is None and counts[ref.name] > 1 and "k" in ref.params:
                ref._auto_label = f"{ref.name}@{ref.params['k']}"
        seen: set[str] = set()
        for ref in self.scorers:
            if ref.label in seen:
                raise ValueError(f"scorer '{ref.label}' is listed twice; give each use its own "
                                 f"params.k or an 'as:' name")
            seen.add(ref.label)
        for name, value in self.thresholds.items():
            if name not in seen:
                raise ValueError(f"thresholds names '{name}', which is not one of this suite's scorers")
            if not 0.0 < value < 1.0:
                raise ValueError(f"threshold for '{name}' must be between 0 and 1, got {value}")
        return self

    @property
    def head_only(self) -> int | None:
        """N when the suite file was read only up to its first N cases (:mod:`evalloop.suites.yamlhead`)."""
        return self._head_only

    @property
    def scorer_labels(self) -> list[str]:
        """The names this suite's scores are stored and shown under (``as:`` names, ``hit@5``…),
        in the suite's order: what every command reads results by."""
        return [ref.label for ref in self.scorers]

    @cached_property
    def cases_file(self) -> Path | None:
        """The JSONL file holding the cases, when they are not inline."""
        if isinstance(self.cases, str):
            base = self.path.parent if self.path else Path.cwd()
            return (base / self.cases).resolve()
        return None

    @cached_property
    def dataset_dir(self) -> Path | None:
        """The retrieval dataset folder, for suites whose cases are a dataset's queries."""
        if self.dataset is None:
            return None
        base = self.path.parent if self.path else Path.cwd()
        return (base / self.dataset).resolve()

    def iter_cases(self) -> Iterator[Case]:
        """Yield the cases in file order (streamed from JSONL when they live there)."""
        if self.dataset_dir is not None:
            yield from case_source("dataset")(self.dataset_dir)
            return
        if isinstance(self.cases, list):  # inline
            yield from self.cases
        elif self.cases_file is not None:  # a JSONL file beside the suite (the validator: cases or dataset)
            kept = self._checked  # a small file's cases, read when it was checked and unchanged since
            if kept is not None and kept[2] is not None and kept[0] == self._stamp():
                yield from kept[2]
            else:
                yield from map(operator.itemgetter(1), jsonl_cases(self.cases_file))

    def split(self) -> Split:
        """The suite's held-out / learn split, grouped (:mod:`evalloop.suites.split`); computed once
        while the cases and the ``holdout`` setting are unchanged (:meth:`validate_cases` computes
        it in its own pass, so a checked suite's cases are not read again for it)."""
        key = self._split_key(self._stamp())
        if self._split is None or self._split[0] != key:
            self._split = (key, self.holdout.split(self.iter_cases()))
        return self._split[1]

    def cases_by_id(self) -> dict[str, Case]:
        """Every case by its id, read once while the cases are unchanged (as :meth:`split`): what
        a reader of many runs' cases looks their input, expected and controls up in."""
        key = self._split_key(self._stamp())
        if self._by_id is None or self._by_id[0] != key:
            self._by_id = (key, {case.id: case for case in self.iter_cases()})
        return self._by_id[1]

    def _split_key(self, stamp: Any) -> tuple[Any, ...]:
        return (stamp, id(self.cases), self.holdout.model_dump_json())

    def held_out_ids(self, ids: Iterable[str] | None = None) -> set[str]:
        """The ids of the held-out cases (among ``ids`` when given)."""
        held = self.split().ids(HELD_OUT)
        return held if ids is None else held.intersection(ids)

    def near_duplicates(self) -> NearCheck | None:
        """Near-duplicate cases on both sides of the held-out split (None: the check is off, or
        nothing is held out)."""
        split = self.split()
        if self.holdout.near_duplicate is None or not split.ids(HELD_OUT):
            return None
        return near_duplicates(split, self.iter_cases(), self.holdout.near_duplicate)

    def near_duplicate_notice(self) -> str | None:
        """:meth:`near_duplicates` as one line for a run or ``suites validate`` (None: nothing to
        say). It never raises: a check that cannot run (no embedder model) says so."""
        try:
            check = self.near_duplicates()
        except Exception as exc:  # noqa: BLE001 - a missing embedder model must not stop a run
            return f"suite '{self.name}': near-duplicate check of the held-out split not run: {exc}"
        return check.notice(self.name) if check is not None else None

    def _stamp(self) -> Any:
        """What says the cases are unchanged since they were checked: the JSONL file's size and time."""
        files = [self.cases_file] if self.cases_file is not None else \
            sorted(self.dataset_dir.glob("*.jsonl")) if self.dataset_dir is not None else []
        try:
            return tuple((f.stat().st_size, f.stat().st_mtime_ns, f.stat().st_ino) for f in files)
        except OSError:
            return ("missing",)

    def validate_cases(self) -> int:
        """Read every case once: schema, duplicate ids. Returns the number of cases.

        A suite object remembers its last check: validating it again (the CLI checks every suite
        before running any, then runs them) reads nothing unless the cases file changed.
        """
        stamp = self._stamp()
        if self._checked is not None and self._checked[0] == stamp and stamp != ("missing",):
            return self._checked[1]
        keep: list[Case] | None = None
        if self.cases_file is not None and stamp != ("missing",) and stamp[0][0] <= KEEP_PARSED_BYTES:
            keep = []  # a small file is read once: the run takes its cases from the check
        rows: list[_SplitRow] = []  # what the split needs of each case, read in the same pass
        count = self._validate_cases(keep, rows)
        self._checked = (stamp, count, keep)
        if stamp != ("missing",):
            self._split = (self._split_key(stamp), self.holdout.split(rows, identity=operator.attrgetter("input")))
        return count

    def _sources(self) -> Iterator[tuple[int | None, Case]]:
        if self.cases_file:
            return jsonl_cases(self.cases_file)
        return ((None, c) for c in self.iter_cases())

    def _validate_cases(self, keep: list[Case] | None = None, rows: list[_SplitRow] | None = None) -> int:
        """Every case parsed and checked (into ``keep`` when given); duplicate ids found from 8-byte
        hashes of the ids (a second pass names the duplicate only when two hashes are equal), not
        from a set of them."""
        import numpy as np

        where_file = str(self.cases_file or self.path or self.name)
        hashes = array("q")
        if self.cases_file:
            for _, case in jsonl_cases(self.cases_file):
                if keep is not None:
                    keep.append(case)
                if rows is not None:
                    rows.append(_SplitRow(case.id, input_digest(case.input), case.group, tuple(case.tags)))
                hashes.append(hash(case.id))
        else:
            for case in self.iter_cases():
                if rows is not None:
                    rows.append(_SplitRow(case.id, input_digest(case.input), case.group, tuple(case.tags)))
                hashes.append(hash(case.id))
        if not hashes:
            raise FixtureError("suite has no cases", where=where_file, hint="add at least one case")
        ordered = np.sort(np.frombuffer(hashes, dtype=np.int64))
        clashes = set(ordered[1:][ordered[1:] == ordered[:-1]].tolist())
        if clashes:
            seen: set[str] = set()
            for at, case in self._sources():
                if hash(case.id) not in clashes:
                    continue
                if case.id in seen:
                    where = f"{where_file}:{at}" if at else where_file
                    raise FixtureError(f"duplicate case id '{case.id}'", where=where,
                                       hint="give every case a unique id")
                seen.add(case.id)
        return len(hashes)

