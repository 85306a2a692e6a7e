"""Splitting a suite's cases into named parts, grouped: the one place that decides which part a case is in.

A case's **group** joins it with every case that has the same normalised input
(:func:`normalised_input`: its input text or JSON case-folded, punctuation stripped, whitespace
collapsed) or the same ``group`` key (the case field ``group:``). Groups are the connected
components of those two relations, so two cases that share a text, or a key, or are linked
through a third case, are always in the same part.

A group goes to a part by a salted hash of its **key** — the smallest ``group`` value among its
cases, else the smallest case id (so a case alone is placed by the hash of its own id, the rule
before groups existed) — cut by the parts' fractions in their order. With the bucket
``b = first 8 bytes of sha256(salt + key)`` read as a big-endian integer, parts
``[(a, fa), (b, fb), (c, fc)]`` put a group in ``a`` when ``b < int(fa·2⁶⁴)``, in ``b`` when
``b < int((fa+fb)·2⁶⁴)``, else in ``c`` (the last part takes the rest). So the first part of a
three-part split (train / validation / test with test first) holds exactly the cases the first
part of a two-part split (held-out / learn) holds with the same first fraction and salt. A case
*pinned* to a part (the held-out tags of ``holdout: {tags: [...]}``) takes its whole group there
(the earliest part, in the order given, when members are pinned to several).

:func:`near_duplicates` looks for what grouping cannot see: pairs of cases in *different* parts
whose inputs are close in meaning (cosine of the shipped static embedder at or above a cut-off),
each a candidate for one shared ``group``. Only texts with the same numbers are compared: a
static embedder barely sees digits, and a text that differs in a number is another case.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

HELD_OUT = "held-out"
LEARN = "learn"
#: the cosine (shipped static embedder) from which two inputs on different sides are reported
NEAR_DUPLICATE = 0.97
#: distinct inputs above which the near-duplicate check is not run (its cost grows with their square)
NEAR_MAX_TEXTS = 10_000
#: characters of a normalised input that are embedded for the near-duplicate check
NEAR_CHARS = 2000

_PUNCT = re.compile(r"[^\w\s]")
_NUMBER = re.compile(r"[0-9]+")


class SplitCase(Protocol):
    """What the split reads of a case (:class:`~evalloop.suites.case.Case` fits)."""

    @property
    def id(self) -> str: ...

    @property
    def input(self) -> Any: ...

    @property
    def group(self) -> str | None: ...


def normalised_input(value: Any) -> str:
    """A case input's identity for grouping: its text (JSON with sorted keys for anything else),
    case-folded, punctuation and symbols removed, whitespace collapsed."""
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return " ".join(_PUNCT.sub("", text.casefold()).split()) if not text.isalnum() else text.casefold()


def input_digest(value: Any) -> str:
    """A short stand-in for :func:`normalised_input` (equal inputs, equal digests): what a large
    suite keeps per case for its split instead of the text — the text itself up to 32 characters,
    else ``#`` and a 128-bit BLAKE2b digest (``#`` never occurs in a normalised text)."""
    text = normalised_input(value)
    return text if len(text) <= 32 else "#" + hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def bucket(key: str, salt: str = "") -> bytes:
    """The 8 bytes a group key hashes to: the first 8 bytes of ``sha256(salt + key)`` (UTF-8)."""
    return hashlib.sha256(f"{salt}{key}".encode()).digest()[:8]


def _cuts(parts: Sequence[tuple[str, float]]) -> list[bytes | None]:
    """Each part's upper cut as 8 big-endian bytes (None: everything above the previous cut)."""
    if not parts:
        raise ValueError("a split needs at least one part")
    if len({name for name, _ in parts}) != len(parts):
        raise ValueError("two parts of a split share a name")
    total, cuts = 0.0, list[bytes | None]()
    for i, (name, fraction) in enumerate(parts):
        if not 0.0 <= fraction <= 1.0:
            raise ValueError(f"part {name!r}: fraction {fraction} is not between 0 and 1")
        total += fraction
        if i == len(parts) - 1:
            cuts.append(None)
        else:
            cut = int(total * 2**64)
            cuts.append(None if cut >= 2**64 else cut.to_bytes(8, "big"))
    if total > 1.0 + 1e-9:
        raise ValueError(f"the parts' fractions add up to {total:g}, more than 1")
    return cuts


@dataclass
class Split:
    """Which part every case is in, and the group that put it there."""

    parts: tuple[str, ...]
    part_of: dict[str, str] = field(default_factory=dict)   # case id → part
    group_of: dict[str, str] = field(default_factory=dict)  # case id → its group's key

    def ids(self, part: str) -> set[str]:
        """The ids of the cases in ``part``."""
        if part not in self.parts:
            raise KeyError(f"no part {part!r} in this split ({', '.join(self.parts)})")
        return {c for c, p in self.part_of.items() if p == part}

    def groups(self) -> dict[str, list[str]]:
        """Group key → its case ids (in case order), for groups of more than one case."""
        members: dict[str, list[str]] = {}
        for case_id, key in self.group_of.items():
            members.setdefault(key, []).append(case_id)
        return {k: v for k, v in members.items() if len(v) > 1}


def split_cases(cases: Iterable[SplitCase], parts: Sequence[tuple[str, float]], *, salt: str = "",
                pinned: Mapping[str, str] | Callable[[Any], str | None] | None = None,
                identity: Callable[[Any], str] | None = None) -> Split:
    """Assign every case to one of ``parts`` (name, fraction) by group, salted hash and fractions
    (see the module's text); ``pinned`` (case id → part, or a function of the case) places a
    case's whole group in that part instead. ``identity`` gives a case's input identity (default:
    :func:`normalised_input` of its input; :func:`input_digest` of it works the same)."""
    identity = identity or (lambda case: normalised_input(case.input))
    cuts = _cuts(parts)
    names = tuple(name for name, _ in parts)
    order = {name: i for i, name in enumerate(names)}
    pin_of: Callable[[Any], str | None] | None = None
    if callable(pinned):
        pin_of = pinned
    elif pinned:
        table = pinned
        pin_of = lambda c: table.get(c.id)  # noqa: E731
    ids: list[str] = []
    groups: list[str | None] = []
    pins: dict[int, str] = {}
    parent: list[int] = []
    by_text: dict[str, int] = {}
    by_group: dict[str, int] = {}
    joined = False

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def union(i: int, j: int) -> None:
        a, b = root(i), root(j)
        if a != b:
            parent[max(a, b)] = min(a, b)

    for i, case in enumerate(cases):
        ids.append(case.id)
        parent.append(i)
        j = by_text.setdefault(identity(case), i)
        if j != i:
            union(i, j)
            joined = True
        group = case.group
        groups.append(group)
        if group is not None:
            j = by_group.setdefault(group, i)
            if j != i:
                union(i, j)
                joined = True
        if pin_of is not None:
            pin = pin_of(case)
            if pin is not None:
                if pin not in order:
                    raise ValueError(f"case {case.id!r} is pinned to {pin!r}, which is not a part of the split")
                pins[i] = pin
    out = Split(parts=names)
    part_of, group_of = out.part_of, out.group_of
    sha, salted = hashlib.sha256, salt.encode()
    bounds = [b"\xff" * 9 if cut is None else cut for cut in cuts[:-1]]  # 9 bytes: above every digest

    def drawn(key: str) -> str:
        return names[bisect.bisect_right(bounds, sha(salted + key.encode()).digest()[:8])]

    if not joined and not pins:  # every case a group of its own (the common case): one pass
        for case_id, group in zip(ids, groups, strict=True):
            key = group or case_id
            part_of[case_id], group_of[case_id] = drawn(key), key
        return out
    members: dict[int, list[int]] = {}
    for i in range(len(ids)):
        members.setdefault(root(i), []).append(i)
    for rows in members.values():
        named = [g for g in (groups[i] for i in rows) if g is not None]
        key = min(named) if named else min(ids[i] for i in rows)
        pinned_to = [pins[i] for i in rows if i in pins]
        part = min(pinned_to, key=order.__getitem__) if pinned_to else drawn(key)
        for i in rows:
            part_of[ids[i]] = part
            group_of[ids[i]] = key
    return out


@dataclass(frozen=True)
class NearPair:
    """Two cases in different parts whose inputs are close in meaning."""

    a: str
    b: str
    cosine: float
    parts: tuple[str, str]


@dataclass
class NearCheck:
    """What the near-duplicate check found (``skipped``: why it did not run)."""

    cut: float
    pairs: list[NearPair] = field(default_factory=list)
    skipped: str | None = None

    def notice(self, suite: str) -> str | None:
        """One line for the run or ``suites validate`` (None when there is nothing to say)."""
        if self.skipped:
            return f"suite '{suite}': near-duplicate check of the held-out split not run: {self.skipped}"
        if not self.pairs:
            return None
        shown = ", ".join(f"{p.a} ~ {p.b} ({p.cosine:.2f})" for p in self.pairs[:5])
        more = f" and {len(self.pairs) - 5} more" if len(self.pairs) > 5 else ""
        return (f"suite '{suite}': {len(self.pairs)} near-duplicate pair(s) of cases on both sides of the "
                f"held-out split (cosine >= {self.cut:g}): {shown}{more}; give each pair one `group:` to keep "
                f"it on one side, or set holdout.near_duplicate")


_near_cache: dict[tuple[str, float], NearCheck] = {}


def near_duplicates(split: Split, cases: Iterable[SplitCase], cut: float = NEAR_DUPLICATE, *,
                    embedder: Any = None, max_texts: int = NEAR_MAX_TEXTS) -> NearCheck:
    """Pairs of ``cases`` in different parts of ``split`` whose normalised inputs have a cosine of
    at least ``cut`` on ``embedder`` (default: the shipped static one), closest first. Each
    distinct text is embedded once; the parts are compared block by block with NumPy (only pairs
    across parts: a pair inside one part leaks nothing)."""
    import numpy as np

    by_text: dict[tuple[str, str], str] = {}  # (part, text) → its first case id
    for case in cases:
        part = split.part_of.get(case.id)
        if part is not None:
            by_text.setdefault((part, normalised_input(case.input)), case.id)
    if len(by_text) > max_texts:
        return NearCheck(cut, skipped=f"{len(by_text)} distinct inputs, more than {max_texts}")
    digest = hashlib.sha256(json.dumps(sorted(by_text), ensure_ascii=False).encode()).hexdigest()
    default = embedder is None
    if default and (digest, cut) in _near_cache:
        return _near_cache[(digest, cut)]
    keys = list(by_text)
    if embedder is None:
        from evalloop.memory.embedders import default_embedder

        embedder = default_embedder()
    vectors = np.asarray(embedder.embed([t[:NEAR_CHARS] for _, t in keys]), dtype=np.float32)
    # texts are compared only with texts of the same numbers: one that differs in a number is
    # another case (a static embedder barely sees digits: "service 5" and "service 0" score 1.00)
    rows: dict[tuple[tuple[str, ...], str], list[int]] = {}
    for i, (part, text) in enumerate(keys):
        rows.setdefault((tuple(sorted(_NUMBER.findall(text))), part), []).append(i)
    found: list[NearPair] = []
    for (numbers, p), left_rows in rows.items():
        for q in split.parts[split.parts.index(p) + 1:]:
            right = np.asarray(rows.get((numbers, q), ()), dtype=np.int64)
            left = np.asarray(left_rows, dtype=np.int64)
            if not right.size:
                continue
            for start in range(0, left.size, 1024):
                block = left[start:start + 1024]
                sims = vectors[block] @ vectors[right].T
                for r, c in zip(*np.nonzero(sims >= cut), strict=True):
                    a, b = by_text[keys[block[r]]], by_text[keys[right[c]]]
                    found.append(NearPair(a, b, round(float(sims[r, c]), 4), (p, q)))
    found.sort(key=lambda n: (-n.cosine, n.a, n.b))
    result = NearCheck(cut, found)
    if default:
        _near_cache[(digest, cut)] = result
    return result
