"""Cases and suites: the fixture models, and loading + validating suite files.

A suite file (YAML or JSON) declares a name, a target, scorers and cases; cases may stand
inline or in a JSONL file beside it (``cases: cases.jsonl``), which is streamed, not held.
Every problem is reported as a :class:`FixtureError` naming the file, the line or case id,
and what is wrong — before anything is run or written.
"""

from __future__ import annotations

import hashlib
import json
import operator
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any, Literal, NamedTuple

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from evalloop.config import VerdictSettings
from evalloop.errors import FixtureError
from evalloop.suites.jsonlines import not_utf8, open_jsonl, parse_line
from evalloop.suites.split import (
    HELD_OUT,
    LEARN,
    NEAR_DUPLICATE,
    NearCheck,
    Split,
    bucket,
    input_digest,
    near_duplicates,
    split_cases,
)
from evalloop.suites.yamlhead import cases_head
from evalloop.suites.yamlload import load_yaml
from evalloop.validation import first_error

SUITE_SUFFIXES = (".yaml", ".yml", ".json")
PACKAGE_FIXTURES = Path(__file__).parent.parent / "fixtures"


SCOPE_TAG = "scope:"
"""A case tagged ``scope:<id>`` belongs to that scope (a conversation, a user): the cluster its
verdict's statistics resample, and a row of the per-scope tables."""


def scope_of(tags: Iterable[str]) -> str | None:
    """The scope a case's tags name (the first ``scope:`` tag), or None."""
    return next((t[len(SCOPE_TAG):] for t in tags if t.startswith(SCOPE_TAG)), None)


class Case(BaseModel):
    """One fixture: an input for the target, what is expected, and labels.

    ``expect: fail`` (or ``{scorer: fail}``) makes the case a *negative control*. With a fixed
    ``output`` it tests the scorers: the target is not called, the scorers it names grade that
    output, and a scorer that passes it is ``scorer broken``. Without one it runs through the
    target like any case: an *expected failure* of the product, which never blames a scorer.
    """

    model_config = ConfigDict(extra="forbid")

    id: str
    input: Any
    expected: Any = None
    tags: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    expect: Literal["pass", "fail"] | dict[str, Literal["pass", "fail"]] = "pass"
    output: Any = None  # a fixed output (given, even as null): graded in place of the target's
    #: cases with the same group are on the same side of every split (:mod:`evalloop.suites.split`)
    group: str | None = None

    def expects_fail(self, scorer: str) -> bool:
        """Whether this case is a negative control (known-bad) for the given scorer."""
        if isinstance(self.expect, dict):
            return self.expect.get(scorer, "pass") == "fail"
        return self.expect == "fail"

    @property
    def fixed_output(self) -> bool:
        """Whether the case carries its own output (the target is not called for it)."""
        return "output" in self.model_fields_set

    def tests_scorer(self, scorer: str) -> bool:
        """Whether this case is a negative control that tests ``scorer``: known-bad for it, with a
        fixed output. Only such a case can show the scorer broken."""
        return self.fixed_output and self.expects_fail(scorer)

    @field_validator("output")
    @classmethod
    def _output_for_controls(cls, v: Any, info: ValidationInfo) -> Any:
        expect = info.data.get("expect", "pass")
        if expect == "pass" or (isinstance(expect, dict) and "fail" not in expect.values()):
            raise ValueError("a fixed output is for a negative control that tests the scorer: add "
                             "'expect: fail' (or 'expect: {scorer: fail}'), or drop 'output' to run "
                             "the case through the target")
        return v

    @field_validator("id", mode="before")
    @classmethod
    def _id_text(cls, v: Any) -> Any:
        if isinstance(v, int) and not isinstance(v, bool):
            return str(v)
        if isinstance(v, str) and not v.strip():
            raise ValueError("case id must not be empty")
        return v

    @field_validator("tags", mode="before")
    @classmethod
    def _tags_list(cls, v: Any) -> Any:
        return [t.strip() for t in v.split(",") if t.strip()] if isinstance(v, str) else v

    @field_validator("group", mode="before")
    @classmethod
    def _group_text(cls, v: Any) -> Any:
        if isinstance(v, int) and not isinstance(v, bool):
            return str(v)
        if isinstance(v, str) and not v.strip():
            raise ValueError("a case's group must not be empty (leave it out for none)")
        return v


class ScorerRef(BaseModel):
    """A scorer as a suite uses it: a registered name, parameters, and an optional threshold.

    ``as`` names this use of the scorer in results and history, so one scorer may be listed
    more than once with different parameters; without it a second use of ``hit``/``recall``/…
    with a ``k`` param is named ``hit@5`` (see :attr:`label`).
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str
    params: dict[str, Any] = Field(default_factory=dict)
    threshold: float | None = Field(default=None, gt=0.0, lt=1.0)
    pass_mark: float | None = Field(default=None, ge=0.0, le=1.0)
    min_score: float | None = Field(default=None, ge=0.0, le=1.0)  # absolute floor (0 turns it off)
    timeout: float | None = Field(default=None, gt=0)  # seconds per grading; else the suite's timeout
    alias: str | None = Field(default=None, alias="as", pattern=r"^[A-Za-z0-9][A-Za-z0-9_.@:-]*$")
    _auto_label: str | None = PrivateAttr(default=None)

    @property
    def label(self) -> str:
        """The name results are stored under: ``as``, else an automatic ``name@k``, else ``name``."""
        return self.alias or self._auto_label or self.name


#: built-in targets whose module was renamed: a suite naming the old ref still runs (the ref is read
#: as the new one, issue #43: ``evalloop.retrieval.suite`` is now ``dataset_cases``, its targets are named
#: where they live)
MOVED_TARGETS = {"evalloop.retrieval.suite:AnswerTarget": "evalloop.retrieval.answer_target:AnswerTarget"}
MOVED_TARGET_MODULES = {"evalloop.retrieval.suite:": "evalloop.retrieval.suite_targets:"}


class TargetRef(BaseModel):
    """The system under test: ``module:function`` plus keyword parameters for it."""

    model_config = ConfigDict(extra="forbid")

    ref: str
    params: dict[str, Any] = Field(default_factory=dict)

    @field_validator("ref")
    @classmethod
    def _moved(cls, ref: str) -> str:
        """A built-in target's ref under its module's present name (:data:`MOVED_TARGETS`)."""
        if ref in MOVED_TARGETS:
            return MOVED_TARGETS[ref]
        old = next((p for p in MOVED_TARGET_MODULES if ref.startswith(p)), None)
        return ref if old is None else MOVED_TARGET_MODULES[old] + ref[len(old):]


class SuiteVerdict(VerdictSettings):
    """A suite's ``verdict:`` block: the project's verdict settings (``[verdict]``) it overrides
    for this suite, and its scorers' ``threshold`` and ``pass_mark`` (a scorer's own entry still
    wins). Only the keys it sets override anything (:meth:`overrides`); a key it does not know,
    or a value out of range, stops the suite when it is read (one line naming the key)."""

    threshold: float | None = Field(default=None, gt=0, lt=1)
    pass_mark: float | None = Field(default=None, ge=0, le=1)

    def overrides(self) -> dict[str, object]:
        """The settings the block sets, as the verdict policy takes them."""
        return self.model_dump(exclude_unset=True)


def holdout_bucket(case_id: str, salt: str = "") -> float:
    """Where a case id (or a group's key) falls in [0, 1): the first 8 bytes of SHA-256 of
    ``salt + case_id`` (UTF-8), big-endian, over 2**64 (:func:`evalloop.suites.split.bucket`). A
    group is held out when its bucket is below the fraction (compared exactly, as integers: the 8
    bytes below ``int(fraction * 2**64)``), so a case never changes sides when other cases are
    added or removed, unless one of them joins its group."""
    return int.from_bytes(bucket(case_id, salt), "big") / 2**64


class Holdout(BaseModel):
    """Which cases are held out of learning: never in a lesson, and what generalisation is measured on.

    ``fraction`` of the case groups by their key's :func:`holdout_bucket` (default 0.3; 0 holds
    nothing out), or, when ``tags`` are given, the groups of the cases carrying one of them.
    Cases with the same normalised input or the same ``group`` are one group
    (:mod:`evalloop.suites.split`). ``near_duplicate`` is the cosine from which two cases on
    different sides are reported as near duplicates (None: no check). In a suite file:
    ``holdout: 0.3``, ``holdout: {tags: [held-out]}`` or ``holdout: {fraction: 0.25, salt: v2}``.
    """

    model_config = ConfigDict(extra="forbid")

    fraction: float = Field(default=0.3, ge=0.0, lt=1.0)
    tags: list[str] = Field(default_factory=list)
    salt: str = ""
    near_duplicate: float | None = Field(default=NEAR_DUPLICATE, gt=0.0, le=1.0)

    @model_validator(mode="before")
    @classmethod
    def _short(cls, v: Any) -> Any:
        if isinstance(v, int | float) and not isinstance(v, bool):
            return {"fraction": v}
        if isinstance(v, str):
            return {"tags": [t.strip() for t in v.split(",") if t.strip()]}
        if isinstance(v, list):
            return {"tags": v}
        if isinstance(v, dict) and v.get("near_duplicate") is False:
            return {**v, "near_duplicate": None}
        return v

    def parts(self, learn: Sequence[tuple[str, float]] = ()) -> list[tuple[str, float]]:
        """The parts as :func:`~evalloop.suites.split.split_cases` takes them: the held-out part
        first (by tags: none by hash), then the learn cases as one part — or, given ``learn``
        (name, share of the learn cases), divided into those parts (``prompt revise``'s
        validation and train splits), the held-out part unchanged."""
        held = 0.0 if self.tags else self.fraction
        if not learn:
            return [(HELD_OUT, held), (LEARN, 1.0 - held)]
        return [(HELD_OUT, held), *((name, share * (1.0 - held)) for name, share in learn)]

    def split(self, cases: Iterable[Any], identity: Callable[[Any], str] | None = None,
              learn: Sequence[tuple[str, float]] = ()) -> Split:
        """The held-out / learn split of ``cases``, grouped (:func:`~evalloop.suites.split.split_cases`);
        ``learn`` divides the learn cases further (:meth:`parts`): the held-out part is the same."""
        wanted = set(self.tags)
        pin = (lambda c: HELD_OUT if wanted.intersection(c.tags) else None) if wanted else None
        return split_cases(cases, self.parts(learn), salt=self.salt, pinned=pin, identity=identity)

    def held_out(self, case_id: str, tags: list[str] | tuple[str, ...] = ()) -> bool:
        """Whether a case *on its own* is held out (by its id's hash, or by its tags): the rule for a
        case in no group. A suite's cases are split together (:meth:`Suite.held_out_ids`)."""
        if self.tags:
            return any(t in self.tags for t in tags)
        return bool(self.held_out_of((case_id,)))

    def held_out_of(self, ids: Iterable[str]) -> set[str]:
        """The held-out ids among ``ids`` by the hash, each case on its own (no groups: see
        :meth:`Suite.held_out_ids`)."""
        if self.fraction <= 0:
            return set()
        # the first 8 digest bytes against the cut's 8 big-endian bytes: the integer comparison of
        # holdout_bucket, without building an integer per case (fraction < 1, so the cut fits)
        sha, salt = hashlib.sha256, self.salt.encode()
        cut = int(self.fraction * 2**64).to_bytes(8, "big")
        return {c for c in ids if sha(salt + c.encode()).digest()[:8] < cut}

    def describe(self) -> str:
        return f"tags {', '.join(self.tags)}" if self.tags else f"fraction {self.fraction:g}" + \
            (f", salt {self.salt!r}" if self.salt else "")


class EarlyStop(BaseModel):
    """``early_stop``: the suite's judges grade the cases in ``looks`` random batches and stop once
    the verdict is settled (:mod:`evalloop.verdicts.early_stop`). ``early_stop: true`` takes the
    defaults; ``spending`` shapes the boundaries; ``power_loss`` is the share of the power to see
    a threshold-size drop that a stop for "no change" may spend."""

    model_config = ConfigDict(extra="forbid")

    looks: int = Field(default=4, ge=2, le=20)
    spending: Literal["obrien-fleming", "pocock"] = "obrien-fleming"
    power_loss: float = Field(default=0.02, gt=0, le=0.2)


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


CaseSource = Callable[[Path], Iterator[Case]]
_CASE_SOURCES: dict[str, CaseSource] = {}


def register_case_source(name: str, source: CaseSource) -> None:
    """Make ``source(folder) -> cases`` serve suites whose cases come from a ``name`` folder.

    Packages register theirs through the ``evalloop.case_sources`` entry-point group (the
    benchmark datasets of :mod:`evalloop.retrieval` serve ``dataset:`` that way), so the core
    never imports them.
    """
    _CASE_SOURCES[name] = source


def case_source(name: str) -> CaseSource:
    """The case source registered under ``name`` (entry points are loaded on first use)."""
    if name not in _CASE_SOURCES:
        from importlib.metadata import entry_points

        for ep in entry_points(group="evalloop.case_sources"):
            if ep.name == name:
                register_case_source(name, ep.load())
    if name not in _CASE_SOURCES:
        raise FixtureError(f"no case source '{name}' is installed",
                           hint="reinstall evalloop (pip install .) so its entry points are registered")
    return _CASE_SOURCES[name]


#: a JSONL cases file up to this size keeps its cases from the check for the run (≈ 60,000 short
#: cases); a larger one is read again, as a stream, so memory stays flat as suites grow
KEEP_PARSED_BYTES = 4 * 1024 * 1024


def jsonl_cases(path: Path) -> Iterator[tuple[int, Case]]:
    """(line number, case) of every non-blank line of a JSONL cases file, in file order; a
    FixtureError naming the line for the first bad one.

    pydantic-core parses and validates each line in one call (``validate_json``). A line it
    refuses takes the slow path — ``json.loads``, then the model — which either accepts it as
    Python's JSON does (``NaN``, a lone surrogate) or says what is wrong, with the column."""
    validate = Case.__pydantic_validator__.validate_json
    with open_jsonl(path) as handle:
        for lineno, raw in enumerate(handle, start=1):
            try:
                case = validate(raw)
            except ValidationError:
                if not raw.strip():
                    continue
                case = _case(parse_line(raw, path, lineno), f"{path}:{lineno}")
            yield lineno, case


_CASE_LIST = TypeAdapter(list[Case])


def _case(data: Any, where: str) -> Case:
    if not isinstance(data, dict):
        raise FixtureError("a case must be an object with id and input", where=where)
    try:
        return Case.model_validate(data)
    except ValidationError as exc:
        case_id = data.get("id")
        raise FixtureError(first_error(exc, Case), where=f"{where} (case '{case_id}')" if case_id
                           else where, hint="a case has id, input, expected, tags, metadata, expect, output") from None


def _valid_cases(items: list[Any]) -> list[Case] | None:
    """The cases validated in one call (a 10k-case suite: a few times faster than one by one);
    None when one is not a mapping or does not validate."""
    if not all(isinstance(item, dict) for item in items):
        return None
    try:
        return _CASE_LIST.validate_python(items)
    except ValidationError:
        return None


def load_suite(path: str | Path, limit: int | None = None) -> Suite:
    """Load and validate a suite file, including all its cases (with ``limit``, a YAML file's
    first ``limit`` cases when the rest need not be read: :func:`~evalloop.suites.yamlhead.cases_head`).
    Raises FixtureError."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise FixtureError(f"cannot read suite file: {exc.strerror}", where=str(path)) from None
    except UnicodeDecodeError as exc:
        raise not_utf8(exc, path, line=exc.object[:exc.start].count(b"\n") + 1) from None
    head = cases_head(text, limit) if limit and path.suffix != ".json" else None
    if head is not None:
        text = head
    lines: list[int] = []
    try:
        if path.suffix == ".json":
            data = json.loads(text)
        else:
            data, lines = load_yaml(text, path)  # aliases refused before anything expands
    except json.JSONDecodeError as exc:
        raise FixtureError(f"invalid JSON: {exc.msg}", where=f"{path}:{exc.lineno}",
                           hint="fix the JSON syntax") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        problem = getattr(exc, "problem", None) or str(exc).split("\n")[0]
        raise FixtureError(f"invalid YAML: {problem}", where=where,
                           hint="fix the YAML syntax (indentation, quotes, colons)") from None
    if not isinstance(data, dict):
        raise FixtureError("a suite file must be a mapping with name, target, scorers, cases",
                           where=str(path))
    raw_cases = data.get("cases")
    if isinstance(raw_cases, list):
        cases = _valid_cases(raw_cases)
        if cases is None:  # one by one, for the file and line of the first that is wrong
            cases = []
            for i, item in enumerate(raw_cases):
                line = lines[i] if i < len(lines) else None
                cases.append(_case(item, f"{path}:{line}" if line else f"{path} (case #{i + 1})"))
        data = {**data, "cases": cases}
    try:
        suite = Suite.model_validate({**data, "path": path.resolve()})
    except ValidationError as exc:
        raise FixtureError(first_error(exc, Suite), where=str(path),
                           hint="see `evalloop suites validate --help` for the suite format") from None
    if isinstance(suite.cases, list):
        seen: dict[str, int] = {}
        for i, case in enumerate(suite.cases):
            if case.id in seen:
                line = lines[i] if i < len(lines) else None
                raise FixtureError(f"duplicate case id '{case.id}'",
                                   where=f"{path}:{line}" if line else str(path),
                                   hint="give every case a unique id")
            seen[case.id] = i
    if head is not None:
        suite._head_only = limit
    return suite
