"""Per-case scores held compactly: one float per case, in case order, beside one shared id list.

A run's scores of one scorer are a vector aligned to the run's case ids (NaN where a case was
not graded: errored, skipped, never reached). Runs of the same cases share their id list, so a
run and its baseline window line up by position, with no per-case dictionaries: 8 bytes per
case and run instead of a dict entry, a key and a float object. :class:`Aligned` is what
:func:`evalloop.verdict.decide_aligned` judges; :func:`align` builds it from mappings or from
stored vectors (whichever each window run has).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np


def ids_digest(ids: Sequence[str]) -> str:
    """What identifies a case list (ids in order): runs with equal digests align by position."""
    digest = hashlib.sha256()
    for case_id in ids:
        digest.update(case_id.encode("utf-8", "surrogatepass"))
        digest.update(b"\0")
    return digest.hexdigest()[:32]


class CaseScores(Mapping[str, float]):
    """A read-only case id → score view of a vector (NaN entries are absent)."""

    __slots__ = ("ids", "values")

    def __init__(self, ids: Sequence[str], values: np.ndarray) -> None:
        self.ids, self.values = ids, values

    def __getitem__(self, case_id: str) -> float:
        for i, known in enumerate(self.ids):  # a lookup is rare (reports); iteration is the use
            if known == case_id and not math.isnan(self.values[i]):
                return float(self.values[i])
        raise KeyError(case_id)

    def __iter__(self) -> Iterator[str]:
        for i in np.flatnonzero(~np.isnan(self.values)):
            yield self.ids[int(i)]

    def __len__(self) -> int:
        return int(np.count_nonzero(~np.isnan(self.values)))

    def items(self):  # type: ignore[override]
        values = self.values
        return ((self.ids[int(i)], float(values[i])) for i in np.flatnonzero(~np.isnan(values)))


class Vector:
    """One run's scores of one scorer: ``values[i]`` is case ``ids[i]``'s (NaN: no grade)."""

    __slots__ = ("ids", "values", "_digest")

    def __init__(self, ids: Sequence[str], values: np.ndarray) -> None:
        self.ids, self.values = ids, np.asarray(values, dtype=np.float64)
        self._digest: str | None = None

    @property
    def digest(self) -> str:
        if self._digest is None:
            self._digest = ids_digest(self.ids)
        return self._digest

    @staticmethod
    def decode(data: bytes) -> np.ndarray:
        """A stored vector's values (little-endian float64)."""
        return np.frombuffer(data, dtype="<f8").astype(np.float64)


@dataclass
class Aligned:
    """This run's scores and its window's, one row per case id (NaN where a run has no score).

    ``ids`` lists this run's cases first, in its order, then cases only the window has.
    ``window`` has one column per earlier run, oldest first.
    """

    ids: Sequence[str]
    current: np.ndarray
    window: np.ndarray

    def order(self) -> np.ndarray:
        """Row indices sorted by case id (the order verdict lists and the paired test use)."""
        keys = np.empty(len(self.ids), dtype=object)
        keys[:] = self.ids  # references only; Python's string order, as sorted() uses
        return np.argsort(keys, kind="stable")


def _finite(values: np.ndarray) -> np.ndarray:
    out = np.asarray(values, dtype=np.float64)
    bad = ~np.isfinite(out)
    if bad.any():
        out = out.copy()
        out[bad] = np.nan
    return out


def align(ids: Sequence[str], current: np.ndarray,
          window: Sequence[Mapping[str, float] | np.ndarray]) -> Aligned:
    """Line up this run (``ids``/``current``) with window runs given as mappings (case → score)
    or as vectors already aligned to ``ids``."""
    current = _finite(current)
    index: dict[str, int] | None = None
    extra: list[str] = []
    columns: list[np.ndarray | dict[int, float]] = []
    for run in window:
        if isinstance(run, np.ndarray):
            columns.append(_finite(run))
            continue
        if index is None:
            index = {case_id: i for i, case_id in enumerate(ids)}
        placed: dict[int, float] = {}
        for case_id, value in run.items():
            if value is None or not math.isfinite(value):
                continue
            key = str(case_id)
            row = index.get(key)
            if row is None:
                row = index[key] = len(ids) + len(extra)
                extra.append(key)
            placed[row] = float(value)
        columns.append(placed)
    n = len(ids) + len(extra)
    matrix = np.full((n, len(columns)), np.nan)
    for j, column in enumerate(columns):
        if isinstance(column, np.ndarray):
            matrix[: len(column), j] = column
        elif column:
            rows = np.fromiter(column.keys(), dtype=np.int64, count=len(column))
            matrix[rows, j] = np.fromiter(column.values(), dtype=np.float64, count=len(column))
    all_ids: Sequence[str] = [*ids, *extra] if extra else ids
    cur = np.full(n, np.nan)
    cur[: len(current)] = current
    return Aligned(all_ids, cur, matrix)


def from_mapping(scores: Mapping[str, float]) -> tuple[list[str], np.ndarray]:
    """A mapping's finite scores as (ids, vector), in the mapping's order."""
    ids: list[str] = []
    values: list[float] = []
    for case_id, value in scores.items():
        if value is not None and math.isfinite(value):
            ids.append(str(case_id))
            values.append(float(value))
    return ids, np.array(values, dtype=np.float64)
