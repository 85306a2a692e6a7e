"""What every :class:`evalloop.memory.MemoryAdapter` must do, exercised through the protocol's
methods only: a check that a class merely *has* those methods (``isinstance`` with a runtime
protocol) passes for one that does nothing right."""

from __future__ import annotations

from evalloop.memory import MemoryAdapter


def check_adapter(adapter: MemoryAdapter) -> None:
    """Store, find by meaning within tags, list by tags, update: each answer checked."""
    flaky = adapter.store("Retries hide flaky tests in the payment suite", ["ci", "flaky"], {"runs": 3})
    slow = adapter.store("The checkout page is slow under load", ["perf"])
    assert flaky and slow and flaky != slow
    found = adapter.find("flaky retries", 1, tags="ci")
    assert [m.record.id for m in found] == [flaky]
    record = found[0].record  # (a service may keep more in metadata: mem0 keeps the tags there)
    assert record.tags == ["ci", "flaky"] and record.metadata.get("runs") == 3, record
    assert adapter.find("flaky retries", 5, tags="perf-only-tag") == []  # tags filter, all of them
    assert [r.id for r in adapter.list(tags="perf")] == [slow]
    assert {r.id for r in adapter.list()} == {flaky, slow}
    updated = adapter.update(flaky, "Retries hide flaky tests: quarantine them", ["ci"])
    (record,) = adapter.list(tags="ci")
    assert record.id == updated and record.information == "Retries hide flaky tests: quarantine them"
    assert adapter.list(tags="flaky") == []  # the update replaced the tags
