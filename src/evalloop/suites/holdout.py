"""A suite's ``holdout:`` setting: which cases are held out of learning (by hash or by tags,
grouped: :mod:`evalloop.suites.split`), and where a case id falls (``holdout_bucket``)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from evalloop.suites.split import HELD_OUT, LEARN, NEAR_DUPLICATE, Split, bucket, split_cases


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

