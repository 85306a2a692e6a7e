"""What a run tested and how it was measured: a fingerprint split into the product and the measurement.

A run's fingerprint (built by the runner) holds the **product** — the target, its parameters and
its own description (prompt hashes, model, config), without the parts that change on their own
(the case files, injected failure memories) — and, per scorer, the **measurement** — what turns
an output into a score: the scorer's name, kind, parameters (a judge's rubric), the hash of its
code (a prompt written in it) and, for a judge, the model that grades. The scorer's threshold
(and the pass mark and floor beside it in the verdict policy) is neither: it decides how scores are
judged, not what they are, so a run's stored scores stay comparable when it changes.

The product hash is stored on the run (``runs.product_fingerprint``), the measurement hash on
each scorer's summary (``scorer_summaries.measurement``): a measurement is a scorer's. Rows of
an older evalloop get both from their stored fingerprint when the columns are added
(:func:`backfill`); a row without a fingerprint has neither (``None``: unknown, taken as the same).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import TypeAlias

from sqlalchemy.engine import Connection

#: a fingerprint (or a part of one) as stored: JSON objects, read with isinstance where nested
Fingerprint: TypeAlias = dict[str, object]
#: parts of a fingerprint that change without the system under test changing
VOLATILE_KEYS = frozenset({"cases", "injected"})
#: the top-level parts of a fingerprint that describe the product
PRODUCT_KEYS = ("target", "target_params", "target_fingerprint")
#: keys of a scorer's entry that are verdict policy, not measurement
POLICY_KEYS = frozenset({"threshold"})


def stable_hash(data: object) -> str:
    """A short, stable hash of JSON-able data: every hash of a fingerprint or a part of it."""
    blob = json.dumps(data, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def stable(value: Fingerprint) -> Fingerprint:
    """A fingerprint without its volatile parts (case files, injected failure memories), at any depth."""
    return {k: _stable_value(v) for k, v in value.items() if k not in VOLATILE_KEYS}


def _stable_value(value: object) -> object:
    if isinstance(value, dict):
        return {k: _stable_value(v) for k, v in value.items() if k not in VOLATILE_KEYS}
    return value


def product_part(fingerprint: Fingerprint) -> Fingerprint:
    """The product of a fingerprint: target, its parameters and its own description."""
    return stable({k: fingerprint[k] for k in PRODUCT_KEYS if k in fingerprint})


def measurement_part(entry: Fingerprint) -> Fingerprint:
    """The measurement of one scorer's fingerprint entry: everything but its verdict policy."""
    return {k: v for k, v in entry.items() if k not in POLICY_KEYS}


def scorer_entries(fingerprint: Fingerprint) -> dict[str, Fingerprint]:
    """The scorers' entries of a fingerprint by the name results are stored under."""
    found = fingerprint.get("scorers")
    if not isinstance(found, list):
        return {}
    return {str(e["name"]): e for e in found if isinstance(e, dict) and "name" in e}


def scorer_list(fingerprint: Fingerprint) -> list[object]:
    """The scorers' entries of a fingerprint as stored, in order (``[]``: none)."""
    found = fingerprint.get("scorers")
    return list(found) if isinstance(found, list) else []


def product_hash(fingerprint: Fingerprint) -> str | None:
    """The product's hash; None for a fingerprint that names no target (unknown)."""
    part = product_part(fingerprint)
    return stable_hash(part) if part else None


def measurement_hashes(fingerprint: Fingerprint) -> dict[str, str]:
    """Each scorer's measurement hash, by scorer name."""
    return {name: stable_hash(measurement_part(entry)) for name, entry in scorer_entries(fingerprint).items()}


def parse(stored: str | Mapping[str, object] | None) -> Fingerprint:
    """A stored fingerprint (as its column reads it, or JSON text) as a dict; ``{}`` when there is
    none or it is unreadable."""
    from evalloop.history.models import as_object  # here: a target's hash needs no table models

    return dict(stored) if isinstance(stored, Mapping) else dict(as_object(stored))


def _diff(a: Fingerprint, b: Fingerprint, prefix: str = "") -> list[str]:
    """The keys (one level into dicts, dotted) whose values differ."""
    changed: list[str] = []
    for key in sorted(set(a) | set(b)):
        if a.get(key) == b.get(key):
            continue
        av, bv = a.get(key), b.get(key)
        if isinstance(av, dict) and isinstance(bv, dict):
            changed += [f"{prefix}{key}.{k}" for k in sorted(set(av) | set(bv)) if av.get(k) != bv.get(k)]
        else:
            changed.append(f"{prefix}{key}")
    return changed


def product_changes(before: Fingerprint, after: Fingerprint) -> list[str]:
    """The parts of the product that differ (``target_params.prompt``, ``target_fingerprint.model``)."""
    return _diff(product_part(before), product_part(after))


def measurement_changes(before: Fingerprint, after: Fingerprint, scorer: str) -> list[str]:
    """The parts of one scorer's measurement that differ (``model``, ``params.rubric``, ``code``)."""
    a, b = scorer_entries(before).get(scorer), scorer_entries(after).get(scorer)
    if a is None or b is None:
        return [] if a is b else ["scorer"]
    return _diff(measurement_part(a), measurement_part(b))


def policy_changes(before: Fingerprint, after: Fingerprint) -> list[str]:
    """The verdict policy the fingerprint records that differs, per scorer (``llm-rubric.threshold``)."""
    a, b = scorer_entries(before), scorer_entries(after)
    return [f"{name}.{key}" for name in sorted(set(a) & set(b)) for key in sorted(POLICY_KEYS)
            if a[name].get(key) != b[name].get(key)]


# -- older rows: both hashes from the stored fingerprint -----------------------------------------

def backfill(conn: Connection, run_ids: Iterable[str] | None = None) -> int:
    """Fill ``product_fingerprint`` of runs and ``measurement`` of their scorer summaries where they
    are missing, from each run's stored fingerprint (in the caller's transaction); returns the
    number of runs read. ``run_ids``: only those runs (a run log's import), else every run."""
    from sqlalchemy import select, update

    from evalloop.history.models import Run, ScorerSummary

    runs, summaries = Run.__table__, ScorerSummary.__table__
    query = select(runs.c.id, runs.c.fingerprint).where(runs.c.product_fingerprint.is_(None))
    if run_ids is not None:
        wanted = list(run_ids)
        if not wanted:
            return 0
        query = query.where(runs.c.id.in_(wanted))
    rows = conn.execute(query).all()
    for run_id, text in rows:
        fingerprint = parse(text)
        product = product_hash(fingerprint)
        if product is not None:
            conn.execute(update(runs).where(runs.c.id == run_id).values(product_fingerprint=product))
        for scorer, measured in measurement_hashes(fingerprint).items():
            conn.execute(update(summaries).where(summaries.c.run_id == run_id, summaries.c.scorer == scorer,
                                                 summaries.c.measurement.is_(None)).values(measurement=measured))
    return len(rows)
