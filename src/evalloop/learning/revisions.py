"""The record of a prompt revision, and the three places it is kept.

A :class:`RevisionRecord` says what ``evalloop prompt revise`` did: the diff, the test-split gain
with its interval and p-value at the level this use of the test split had, the metric calls and
the cost, the splits and their salt, and what was written. It is kept

* in the suite's **ledger**, ``history/revisions/<suite>.jsonl`` (one line per revision, beside
  the run logs a project commits): the ledger counts how often a test split has been used to
  confirm (:meth:`Ledger.uses`), which sets the next confirmation's level;
* beside a **written prompt**, ``<file>.revision.json``: the prompt file's text is exactly the
  candidate that was tested (a header comment would change the prompt the target reads), and
  the file beside it says where it came from (``after_sha`` is the hash of that text);
* with the **incidents** whose lessons seeded the reflection (metadata ``revisions``, the last
  :data:`KEPT` of them), so ``memories list`` shows what was done about an incident.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field, JsonValue

if TYPE_CHECKING:
    from evalloop.memory.adapters import MemoryAdapter

#: revisions an incident's metadata keeps (the ledger keeps them all)
KEPT = 10
#: characters of the diff an incident's copy keeps
INCIDENT_DIFF_CHARS = 4000
#: a previous confirmation counts as a use of this test split when it shared at least this share of its cases
OVERLAP = 0.5


class Confirmation(BaseModel):
    """The one paired comparison of the final candidate with the current prompt on the test split."""

    n: int
    current: float
    candidate: float
    gain: float
    low: float | None = None
    high: float | None = None
    level: float = 0.95
    p_value: float
    alpha: float
    test: str = "paired permutation, one-sided"
    better: bool
    scorers: dict[str, dict[str, float | None]] = Field(default_factory=dict)
    worse: list[str] = Field(default_factory=list, description="scorers significantly worse (blocks writing)")

    def line(self) -> str:
        ci = "" if self.low is None else f", {self.level:.0%} interval [{self.low:+.3f}, {self.high:+.3f}]"
        return (f"test split ({self.n} cases): current {self.current:.3f} → candidate {self.candidate:.3f}, "
                f"gain {self.gain:+.3f}{ci}, p = {self.p_value:.3g} (one-sided, alpha {self.alpha:.4g}): "
                + ("better" if self.better else "not shown better"))


class RevisionRecord(BaseModel):
    """What one ``prompt revise`` did (see the module's text)."""

    at: str = Field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    suite: str
    prompt_file: str
    param: str = "prompt_file"
    start: str = Field(description="what seeded reflection: 'incident' (its lesson) or 'failing cases'")
    incidents: list[str] = Field(default_factory=list)
    before_sha: str
    after_sha: str | None = None
    diff: str = ""
    splits: dict[str, int] = Field(default_factory=dict)
    validation_share: float = 0.0
    holdout: str = ""
    salt: str = ""
    test_digest: str = ""
    test_ids: list[str] = Field(default_factory=list)
    use: int = 0
    alpha: float = 0.0
    confirmation: Confirmation | None = None
    metric_calls: int = 0
    max_metric_calls: int = 0
    iterations: int = 0
    candidates: int = 0
    cost_usd: float = 0.0
    outcome: str = ""
    written: str | None = None

    def summary(self) -> dict[str, JsonValue]:
        """The copy an incident keeps: no test case ids, the diff cut short."""
        return self.model_dump(mode="json", exclude={"test_ids"}) | {"diff": self.diff[:INCIDENT_DIFF_CHARS]}


class Ledger:
    """``history/revisions/<suite>.jsonl``: every revision of a suite, one JSON line each."""

    def __init__(self, history_dir: Path, suite: str) -> None:
        safe = suite.replace("/", "_").replace("\\", "_")
        self.path = Path(history_dir) / "revisions" / f"{safe}.jsonl"

    def records(self) -> list[RevisionRecord]:
        if not self.path.is_file():
            return []
        out = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                out.append(RevisionRecord.model_validate_json(line))
            except ValueError:
                continue  # a line cut short, or written by another version: not counted
        return out

    def uses(self, test_ids: list[str]) -> int:
        """How many earlier revisions confirmed on (mostly) these test cases: sharing at least
        :data:`OVERLAP` of them."""
        wanted = set(test_ids)
        if not wanted:
            return 0
        return sum(1 for r in self.records()
                   if r.confirmation is not None and len(wanted & set(r.test_ids)) >= OVERLAP * len(wanted))

    def append(self, record: RevisionRecord) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as f:
            f.write(record.model_dump_json() + "\n")


def sidecar(prompt: Path) -> Path:
    """The file beside a written prompt that says where it came from."""
    return prompt.with_name(prompt.name + ".revision.json")


def write_sidecar(prompt: Path, record: RevisionRecord) -> Path:
    path = sidecar(prompt)
    path.write_text(json.dumps(record.model_dump(exclude={"test_ids"}), indent=2) + "\n", encoding="utf-8")
    return path


def store_with_incidents(adapter: MemoryAdapter, suite: str, ids: list[str], record: RevisionRecord) -> list[str]:
    """Add ``record`` to the metadata of the suite's incidents ``ids`` (their text and state
    unchanged); the ids it was stored with."""
    from evalloop.learning.incident_records import meta
    from evalloop.learning.incidents import incidents

    done = []
    for current in incidents(adapter, suite, status=None):
        m = meta(current)
        if current.id not in ids or m is None:
            continue
        after = m.model_copy(update={"revisions": [*(m.revisions or []), record.summary()][-KEPT:]})
        adapter.update(current.id, current.information, tags=list(current.tags), metadata=after.dump())
        done.append(current.id)
    return done
