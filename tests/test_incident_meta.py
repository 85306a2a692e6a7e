"""An incident record's metadata is one model (``incident_records.IncidentMeta``), read and
written in one place (issue #43, item 1, for incidents)."""

from __future__ import annotations

import re
from pathlib import Path

from evalloop.learning.incident_machine import Cause, Level, State
from evalloop.learning.incident_records import IncidentMeta, meta, view
from evalloop.memory.records import MemoryRecord

SRC = Path(__file__).resolve().parents[1] / "src" / "evalloop"
#: reading an incident's metadata by key: only incident_records may (a target's lesson records,
#: the held-out helpers, the ids-only lesson text and the reference engine's corrections all read
#: them through IncidentMeta)
ALLOWED = {"learning/incident_records.py"}
KEYS = ("failing_cases", "chronic_cases", "status", "eval_suite", "corrections", "still_failing", "scorer",
        "runs_seen", "last_seen", "kind", "eval_run_id", "levels_before", "cause", "baseline_run_ids", "revisions")
#: ``meta.get("scorer")``, ``metadata["status"]``, ``(record.metadata or {}).get("corrections")``
BY_KEY = re.compile(r'(meta|metadata|\{\})\)?(\.get\(|\[)"(' + "|".join(KEYS) + ')"')


def record(metadata: dict) -> MemoryRecord:
    return MemoryRecord(id="m1", information="text", tags=["eval-failure"], metadata=metadata)


def test_the_metadata_round_trips_and_keeps_what_it_does_not_know():
    stored = {"kind": "eval-failure", "eval_suite": "faq", "scorer": "equals", "status": "held",
              "cause": "below floor", "failing_cases": ["q-01"], "levels_before": {"q-01": [0.9, 1.0, 5]},
              "noise": 0.1, "baseline_run_ids": ["a", "b"], "from_a_newer_version": {"x": 1}}
    m = meta(record(stored))
    assert m is not None and m.state is State.HELD and m.levels == {"q-01": Level(0.9, 1.0, 5)}
    assert m.dump()["from_a_newer_version"] == {"x": 1} and "rewrite" not in m.dump()
    assert {k: v for k, v in m.dump().items() if k in stored} == stored
    inc = view(record(stored))
    assert inc.cause is Cause.FLOOR and inc.window_runs == 2 and inc.remembered == ["q-01"]
    assert meta(record({"kind": "note"})) is None and meta(record({})) is None
    assert IncidentMeta().with_levels({"c": Level(0.1234567, 1.0, 3)}) == {"c": [0.123457, 1.0, 3]}


def test_no_module_reads_an_incidents_metadata_by_key():
    found = []
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC).as_posix()
        if rel in ALLOWED:
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if BY_KEY.search(line):
                found.append(f"{rel}:{n}: {line.strip()}")
    assert found == [], "read it through incident_records.meta(record):\n" + "\n".join(found)
