"""Per-case scores held compactly: one float per case, in case order, beside one shared id list.

A run's scores of one scorer are a vector aligned to the run's case ids (NaN where a case was
not graded: errored, skipped, never reached). Runs of the same cases share their id list, so a
run and its baseline window line up by position, with no per-case dictionaries: 8 bytes per
case and run instead of a dict entry, a key and a float object. :class:`Aligned` is what
:func:`evalloop.verdicts.verdict.decide_aligned` judges; :func:`align` builds it from mappings or from
stored vectors (whichever each window run has).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, ItemsView, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np


def ids_digest(ids: Sequence[str]) -> str:
    """What identifies a case list (ids in order): runs with equal digests align by position."""
    digest = hashlib.sha256()
    for start in range(0, len(ids), 4096):  # each id and a NUL, hashed a chunk of ids at a time
        digest.update(("\0".join(ids[start:start + 4096]) + "\0").encode("utf-8", "surrogatepass"))
    return digest.hexdigest()[:32]


class CaseScores(Mapping[str, float]):
    """A read-only case id → score view of a vector (NaN entries are absent).

    ``vector`` is the array itself (float64, aligned to ``ids``, NaN where a case has no score),
    for arithmetic over many cases at once; it is not called ``values``: that is
    ``Mapping.values()``."""

    __slots__ = ("ids", "vector")

    def __init__(self, ids: Sequence[str], values: np.ndarray) -> None:
        self.ids, self.vector = ids, values

    def __getitem__(self, case_id: str) -> float:
        for i, known in enumerate(self.ids):  # a lookup is rare (reports); iteration is the use
            if known == case_id and not math.isnan(self.vector[i]):
                return float(self.vector[i])
        raise KeyError(case_id)

    def __iter__(self) -> Iterator[str]:
        for i in np.flatnonzero(~np.isnan(self.vector)):
            yield self.ids[int(i)]

    def __len__(self) -> int:
        return int(np.count_nonzero(~np.isnan(self.vector)))

    def items(self) -> ItemsView[str, float]:
        return _Items(self)


class _Items(ItemsView[str, float]):
    """A :class:`CaseScores`' items read in one pass over the vector (the generic view would look
    each id up: quadratic)."""

    _mapping: CaseScores

    def __iter__(self) -> Iterator[tuple[str, float]]:
        ids, values = self._mapping.ids, self._mapping.vector
        return ((ids[int(i)], float(values[i])) for i in np.flatnonzero(~np.isnan(values)))


class Vector:
    """One run's scores of one scorer: ``values[i]`` is case ``ids[i]``'s (NaN: no grade)."""

    __slots__ = ("ids", "values", "_digest", "_order")

    def __init__(self, ids: Sequence[str], values: np.ndarray, *, digest: str | None = None) -> None:
        """``digest``: the ids' :func:`ids_digest`, when the caller has it (the runner computed it)."""
        self.ids, self.values = ids, np.asarray(values, dtype=np.float64)
        self._digest = digest
        self._order: np.ndarray | None = None

    @property
    def digest(self) -> str:
        if self._digest is None:
            self._digest = ids_digest(self.ids)
        return self._digest

    @property
    def order(self) -> np.ndarray:
        """The positions of the ids in id order (what :func:`align` sorts rows by), sorted once."""
        if self._order is None:
            self._order = _id_order(self.ids)
        return self._order

    @staticmethod
    def decode(data: bytes) -> np.ndarray:
        """A stored vector's values (little-endian float64): a read-only view of ``data``, no copy."""
        return np.frombuffer(data, dtype="<f8")


@dataclass
class Aligned:
    """This run's scores and its window's, one row per case id, rows sorted by case id (Python's
    string order, as ``sorted()`` uses; NaN where a run has no score).

    ``ids`` names each row: this run's cases and the cases only the window has, together in id
    order — the order verdict lists and the paired test use. ``window`` has one column per
    earlier run, oldest first. ``scopes`` numbers each row's scope (the ``scope:<id>`` tag of
    a question's conversation, user or session: 0, 1, … in row order, −1 for a row without
    one), or is ``None`` when no case has a scope.
    """

    ids: Sequence[str]
    current: np.ndarray
    window: np.ndarray
    scopes: np.ndarray | None = None

    @property
    def compared(self) -> np.ndarray:
        """The rows graded in this run and in at least one window run (a boolean mask)."""
        return ~np.isnan(self.current) & ~np.all(np.isnan(self.window), axis=1)


def scope_codes(ids: Sequence[str], scopes: Mapping[str, str] | None) -> np.ndarray | None:
    """Each id's scope numbered in first-seen order (−1: none); ``None`` when no id has one."""
    if not scopes:
        return None
    index: dict[str, int] = {}
    codes = np.fromiter((-1 if (s := scopes.get(c)) is None else index.setdefault(s, len(index))
                         for c in ids), dtype=np.int64, count=len(ids))
    return codes if index else None


def _id_order(ids: Sequence[str]) -> np.ndarray:
    keys = np.empty(len(ids), dtype=object)
    keys[:] = ids  # references only
    return np.argsort(keys, kind="stable")


def _finite(values: np.ndarray) -> np.ndarray:
    out = np.asarray(values, dtype=np.float64)
    bad = ~np.isfinite(out)
    if bad.any():
        out = out.copy()
        out[bad] = np.nan
    return out


Window = Mapping[str, float] | np.ndarray
WindowRun = Window | Callable[[], Window]


def align(ids: Sequence[str], current: np.ndarray, window: Sequence[WindowRun],
          scopes: Mapping[str, str] | None = None, *, order: np.ndarray | None = None) -> Aligned:
    """Line up this run (``ids``/``current``) with window runs given as mappings (case → score),
    as vectors aligned to ``ids``, or as callables that load either; rows in case-id order
    (``order``: the ids' sorting positions, when the caller has them: :attr:`Vector.order`).
    ``scopes`` (case id → scope) numbers each row's scope (:attr:`Aligned.scopes`).

    Runs are loaded one at a time (a callable is called when its column is filled) and written
    straight into the window matrix in its sorted order: at 100,000 cases the matrix is the one
    whole-window array, and only one stored vector is held beside it."""
    current = _finite(current)
    n_ids = len(ids)
    if order is None:
        order = _id_order(ids)  # row r holds case ids[order[r]]
    matrix = np.full((n_ids, len(window)), np.nan)
    index: dict[str, int] | None = None
    extra: list[str] = []
    beyond: list[list[tuple[int, float]]] = []  # (column, value) cells of each case only the window has
    for j, item in enumerate(window):
        run = item() if callable(item) else item
        if isinstance(run, np.ndarray):
            if len(run) != n_ids:
                raise ValueError(f"a window vector has {len(run)} scores for {n_ids} cases")
            column = matrix[:, j]
            column[...] = run[order]
            column[~np.isfinite(column)] = np.nan
            continue
        if index is None:
            index = {ids[int(i)]: r for r, i in enumerate(order)}
        for case_id, value in run.items():
            if value is None or not math.isfinite(value):
                continue
            key = str(case_id)
            row = index.get(key)
            if row is None:
                row = index[key] = n_ids + len(extra)
                extra.append(key)
                beyond.append([])
            if row < n_ids:
                matrix[row, j] = float(value)
            else:
                beyond[row - n_ids].append((j, float(value)))
        del run
    sorted_ids = list(map(ids.__getitem__, order.tolist()))
    cur = current[order]
    if not extra:
        return Aligned(sorted_ids, cur, matrix, scope_codes(sorted_ids, scopes))
    tail = np.full((len(extra), len(window)), np.nan)
    for r, cells in enumerate(beyond):
        for j, value in cells:
            tail[r, j] = value
    all_ids = [*sorted_ids, *extra]
    resort = _id_order(all_ids)  # rare (a window run read case by case with other cases): one copy
    row_ids = [all_ids[int(i)] for i in resort]
    return Aligned(row_ids, np.concatenate([cur, np.full(len(extra), np.nan)])[resort],
                   np.vstack([matrix, tail])[resort], scope_codes(row_ids, scopes))


def from_mapping(scores: Mapping[str, float]) -> tuple[list[str], np.ndarray]:
    """A mapping's finite scores as (ids, vector), in the mapping's order."""
    ids: list[str] = []
    values: list[float] = []
    for case_id, value in scores.items():
        if value is not None and math.isfinite(value):
            ids.append(str(case_id))
            values.append(float(value))
    return ids, np.array(values, dtype=np.float64)
