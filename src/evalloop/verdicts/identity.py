"""What changed since a run's baseline — the product, a scorer's measurement — and the windows it reads.

The product and the measurement are the two parts of a fingerprint (:mod:`evalloop.history.identity`).
For each scorer of a run, its **product window** is the last N eligible runs of the product before
it, however they were measured (bridges left out); its **baseline** is that window read under the
scorer's current measurement: each run as it was graded when it was measured the same way, else
its *bridge* (its stored outputs re-graded by the current measurement), else not at all — so a
baseline never mixes two judges.

- **The product changed** since the latest run of the window: said (``the product changed since
  run …``), and the window spans both products unless ``restart_on_change``, which restarts it at
  this product.
- **A scorer's measurement changed** (its judge model, rubric, code, parameters) since the
  latest run of its window: the window's runs measured otherwise are bridged
  (:func:`bridge_plan`, re-graded by :mod:`evalloop.run.bridge`), unless bridging is off
  (``--no-bridge``, ``verdict: {bridge: false}``) or their outputs cannot be re-graded; those
  are left out, and the scorer's baseline restarts with this measurement. A change is bridged by
  the first run that sees it or never: once the latest run of the window is measured as this one,
  no bridge is made (a restart stays a restart).

Both can change in one run: the measurement is bridged and the product is compared under the one
new measurement, so a product regression made in the same run is still caught.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from evalloop.history import identity
from evalloop.history.bridges import BridgeRecord, bridged
from evalloop.history.eligibility import measured_as
from evalloop.history.models import Run, ScorerSummary
from evalloop.history.store import HistoryStore

Window = list[tuple[Run, ScorerSummary]]


@dataclass
class FingerprintChange:
    """The product or a scorer's measurement changed since the latest run of the baseline window."""

    previous_run: str
    changed: list[str]  # every part that differs: the product's, scorers.<name>.<part>, scorers.<name>.threshold
    restarted: bool  # the baseline restarts here: for the product, or for a scorer not bridged
    product: list[str] = field(default_factory=list)  # the parts of the product that differ
    measurement: dict[str, list[str]] = field(default_factory=dict)  # scorer → parts of its measurement
    bridged: list[str] = field(default_factory=list)  # scorers whose baseline is re-graded (a bridge)
    product_restarted: bool = False

    @property
    def unbridged(self) -> list[str]:
        """Scorers whose measurement changed and whose baseline restarts here (not bridged)."""
        return [s for s in self.measurement if s not in self.bridged]

    def describe(self) -> str:
        """One line: what changed since which run, and what the baseline does about it."""
        parts = []
        if self.product:
            tail = "the baseline restarts here" if self.product_restarted else "the baseline spans both"
            parts.append(f"the product changed since run {self.previous_run} ({_some(self.product)}): {tail}")
        if self.measurement:
            said = "; ".join(f"{s}: {_some(c)}" for s, c in self.measurement.items())
            done = []
            if self.bridged:
                done.append(f"the baseline of {', '.join(self.bridged)} is re-graded from stored outputs "
                            "(bridge), so the product is compared under one measurement")
            if self.unbridged:
                done.append(f"the baseline of {', '.join(self.unbridged)} restarts here")
            parts.append(f"the measurement changed since run {self.previous_run} ({said}): {'; '.join(done)}")
        if not parts:  # only the verdict policy (a threshold): the scores stay comparable
            parts.append(f"the verdict settings changed since run {self.previous_run} ({_some(self.changed)}): "
                         "the baseline spans both")
        return "; ".join(parts)


def _some(items: list[str]) -> str:
    return ", ".join(items[:4]) + (f" and {len(items) - 4} more" if len(items) > 4 else "")


@dataclass
class Windows:
    """A run's baseline reads for one comparison: each scorer's product window (read once), the
    window under its current measurement (read again only when the product window mixes
    measurements), and what changed."""

    store: HistoryStore
    run: Run
    size: int
    measurements: dict[str, str | None]
    product: dict[str, Window]
    change: FingerprintChange | None = None
    restart_at: str | None = None  # the product the window restarted at (restart_on_change)
    _measured: dict[str, Window] = field(default_factory=dict)

    def measured(self, scorer: str) -> Window:
        """The scorer's baseline window under its current measurement (oldest first)."""
        if scorer not in self._measured:
            own = self.product.get(scorer, [])
            measurement = self.measurements.get(scorer)
            if measurement is None or all(measured_as(s, measurement) for _, s in own):
                self._measured[scorer] = own  # one measurement throughout: the product window is it
            else:
                self._measured[scorer] = self.store.baseline_runs(self.run.suite, scorer, self.run, self.size,
                                                                  self.restart_at, measurement=measurement)
        return self._measured[scorer]

    def changed_measurement(self, scorer: str) -> bool:
        """Whether the latest run of the scorer's product window was measured otherwise."""
        own = self.product.get(scorer, [])
        return bool(own) and not measured_as(own[-1][1], self.measurements.get(scorer))


def read(store: HistoryStore, run: Run, summaries: Mapping[str, ScorerSummary], size: int,
         restart: bool = False) -> Windows:
    """The product windows of ``run``'s graded scorers and what changed since their latest run;
    ``restart``: a product change restarts the window (a scorer's ``restart_on_change``)."""
    graded = [s for s in summaries.values() if not s.skipped]
    product = {s.scorer: store.baseline_runs(run.suite, s.scorer, run, size) for s in graded}
    windows = Windows(store, run, size, {s.scorer: s.measurement for s in graded}, product)
    latest: Run | None = None
    for own in product.values():
        if own and (latest is None or own[-1][0].started_at > latest.started_at):
            latest = own[-1][0]
    if latest is None:
        return windows
    moved = bool(latest.product_fingerprint and run.product_fingerprint
                 and latest.product_fingerprint != run.product_fingerprint)
    measured = [s for s in product if windows.changed_measurement(s)]
    if not moved and not measured and (not run.base_fingerprint or latest.base_fingerprint == run.base_fingerprint):
        return windows
    after = identity.parse(run.fingerprint)
    before = identity.parse(latest.fingerprint)
    policy = identity.policy_changes(before, after)
    if not (moved or measured or policy):  # e.g. a judge skipped before (no key): nothing to say
        return windows
    product_parts = (identity.product_changes(before, after) or ["target"]) if moved else []
    measurement = {s: identity.measurement_changes(identity.parse(product[s][-1][0].fingerprint), after, s)
                   or ["code"] for s in measured}
    restarted = moved and restart
    if restarted:
        windows.restart_at = run.product_fingerprint
        windows.product = {s: store.baseline_runs(run.suite, s, run, size, run.product_fingerprint)
                           for s in product}
    changed = [*product_parts, *(f"scorers.{s}.{part}" for s, parts in measurement.items() for part in parts),
               *(f"scorers.{p}" for p in policy)]
    windows.change = FingerprintChange(latest.id, changed, restarted, product_parts, measurement,
                                       product_restarted=restarted)
    return windows


def bridge_plan(windows: Windows, allowed: Collection[str]) -> list[tuple[Run, list[str]]]:
    """The runs to re-grade, newest first, each with the scorers to re-grade it for: for every scorer
    in ``allowed`` whose measurement changed since the latest run of its window, that window's runs
    measured otherwise that have no bridge to the current measurement yet."""
    wanted: dict[str, tuple[Run, list[str]]] = {}
    for scorer, own in windows.product.items():
        measurement = windows.measurements.get(scorer)
        if scorer not in allowed or measurement is None or not windows.changed_measurement(scorer):
            continue
        stale = [r for r, s in own if not measured_as(s, measurement)]
        done = bridged(windows.store, [r.id for r in stale], scorer, measurement)
        for run in stale:
            if run.id not in done:
                wanted.setdefault(run.id, (run, []))[1].append(scorer)
    return sorted(wanted.values(), key=lambda item: (item[0].started_at, item[0].id), reverse=True)


def settle(windows: Windows) -> FingerprintChange | None:
    """The change as the comparison reports it, once the bridges are made: which scorers' baselines
    are bridged and which restarted; the restart flag."""
    change = windows.change
    if change is None:
        return None
    change.bridged = [s for s in change.measurement
                      if any(r.bridge_of is not None for r, _ in windows.measured(s))]
    change.restarted = change.product_restarted or bool(change.unbridged)
    return change


def bridge_summary(records: list[BridgeRecord]) -> dict[str, object] | None:
    """What the bridges of one run did and cost, as ``--json`` and the terminal show it."""
    if not records:
        return None
    made = [r for r in records if r.made]
    return {"scorers": sorted({s for r in records for s in r.scorers}),
            "runs": [json.loads(r.model_dump_json()) for r in made],
            "unbridged": [{"run": r.run, "reason": r.reason} for r in records if not r.made],
            "llm_calls": sum(r.llm_calls for r in records), "cache_hits": sum(r.cache_hits for r in records),
            "cost_usd": round(sum(r.cost_usd for r in records), 6)}
