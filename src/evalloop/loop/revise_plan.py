"""What a prompt revision will use before it spends anything: its three splits, its budget in
metric calls, the test split's significance level for this use, and the gain it can detect.

**The splits.** One grouped split of the suite's cases (:meth:`Holdout.split
<evalloop.suites.models.Holdout.split>` over :func:`~evalloop.suites.split.split_cases`), with the
suite's own ``holdout`` setting: the held-out part first, then the learn cases divided into
*validation* (``[revise] validation`` of them: GEPA's Pareto selection) and *train* (the rest:
reflection minibatches). So the **test** split is exactly the suite's held-out cases — what
``learn check`` and ``run --held-out`` measure, what no lesson shows — and train + validation are
exactly its learn cases: revision and the learning loop never select on each other's evidence.
Cases with the same normalised input or ``group`` stay in one split. Known-bad cases
(``expect: fail``) and cases with a fixed output test scorers or record a known failure, not the
prompt: they are in no split.

**The significance level.** The test split is reused by every revision of the suite; each use is
a chance to write a useless prompt. The k-th confirmation on (mostly) the same test cases is a
one-sided test at ``alpha / (k (k + 1))``: the levels sum to ``alpha`` over any number of
revisions, so the chance that *any* revision writes a useless prompt stays below ``alpha``.

**The power.** The minimum detectable effect of the test split at that level
(:func:`evalloop.verdicts.power.minimal_detectable_drop`, read on the failure rate: a gain in the
pass rate is a drop in the failure rate), printed before the search and checked against the gain
worth having.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable

from pydantic import BaseModel, Field

from evalloop.errors import ConfigError
from evalloop.suites.models import Case, Suite
from evalloop.suites.split import HELD_OUT
from evalloop.verdicts.power import minimal_detectable_drop

TRAIN, VALIDATION, TEST = "train", "validation", "test"
#: the search's default budget: this many passes over the validation split, and at least MIN_BUDGET
BUDGET_PASSES = 10
MIN_BUDGET = 150


class Splits(BaseModel):
    """The three splits of a revision (case ids in suite order) and how they were cut."""

    train: list[str]
    validation: list[str]
    test: list[str]
    validation_share: float = Field(description="the share of the learn cases in the validation split")
    holdout: str = Field(description="the suite's held-out setting, which is the test split")
    salt: str = ""
    test_groups: dict[str, str] = Field(default_factory=dict, description="test case → its group's key")

    def sizes(self) -> str:
        return f"train {len(self.train)} · validation {len(self.validation)} · test {len(self.test)}"

    def test_digest(self) -> str:
        """Names the test split's cases (the ledger of its uses keys on it)."""
        return hashlib.sha256("\n".join(sorted(self.test)).encode()).hexdigest()[:16]


def revision_splits(suite: Suite, validation: float) -> Splits:
    """The train, validation and test splits of ``suite`` (see the module's text); a split left
    empty is one clear error saying how to mend it."""
    cases = [c for c in suite.iter_cases() if _plain(c)]
    split = suite.holdout.split(cases, learn=[(VALIDATION, validation), (TRAIN, 1.0 - validation)])
    order = [c.id for c in cases]
    test = [c for c in order if split.part_of[c] == HELD_OUT]
    held = suite.held_out_ids()
    if set(test) != held.intersection(order):  # one split: the test split is the held-out part
        raise AssertionError("the test split is not the suite's held-out part")
    out = Splits(train=[c for c in order if split.part_of[c] == TRAIN],
                 validation=[c for c in order if split.part_of[c] == VALIDATION], test=test,
                 validation_share=validation, holdout=suite.holdout.describe(), salt=suite.holdout.salt,
                 test_groups={c: split.group_of[c] for c in test})
    where = str(suite.path or suite.name)
    if not out.test:
        raise ConfigError(f"suite '{suite.name}' has no held-out case: prompt revise confirms on them",
                          where=where, hint="give the suite a `holdout:` fraction (0.3) or held-out tags")
    for name, ids in ((TRAIN, out.train), (VALIDATION, out.validation)):
        if not ids:
            raise ConfigError(f"suite '{suite.name}': the {name} split is empty ({out.sizes()})", where=where,
                              hint="add cases, or set [revise] validation (the validation share of the learn "
                                   "cases) nearer 0.5")
    return out


def _plain(case: Case) -> bool:
    """A case that grades the prompt: not known-bad for any scorer (a control, or an expected
    failure of the product), and not one with a fixed output (the target is not called for it)."""
    return case.expect == "pass" and not case.fixed_output


def alpha_for(use: int, alpha: float) -> float:
    """The one-sided level of the ``use``-th confirmation on a test split: ``alpha / (k (k+1))``."""
    return alpha / (use * (use + 1))


def default_budget(n_validation: int) -> int:
    """The search's metric calls when none are given: ten validation passes, at least 150."""
    return max(MIN_BUDGET, BUDGET_PASSES * n_validation)


class Power(BaseModel):
    """What the test split can show, said before anything is spent."""

    n_test: int
    use: int = Field(description="this is the k-th confirmation on (mostly) these test cases")
    alpha: float = Field(description="the one-sided level of this confirmation")
    current: float = Field(description="the current prompt's mean score on the test split (estimate)")
    source: str = Field(description="where the estimate comes from")
    power: float
    mde: float | None = Field(description="the smallest gain in the mean score detected with `power` "
                                          "(None: not even a perfect prompt would be)")
    min_gain: float
    warning: str | None = None

    def line(self) -> str:
        shown = ("it can show no gain at all" if self.mde is None
                 else f"minimum detectable effect {self.mde:.3f} (power {self.power:g})")
        return (f"test split: {self.n_test} cases, use {self.use} (one-sided alpha {self.alpha:.4g}); current "
                f"mean {self.current:.3f} ({self.source}); {shown}")


def plan_power(n_test: int, use: int, alpha: float, current: float, binary: bool, *, source: str,
               power: float, min_gain: float, spread: float = 0.0) -> Power:
    """The minimum detectable gain of a paired one-sided test on ``n_test`` cases whose current
    mean score is ``current``, and a warning when it is larger than ``min_gain``.

    A gain in the mean score is a drop in the shortfall ``1 − current``, which
    :func:`~evalloop.verdicts.power.minimal_detectable_drop` sizes: for pass/fail scores from the
    cases a candidate fixes (a case's score under one prompt taken as what one run gives, as with
    the response cache: no run-to-run noise), with the exact test's floor of fixed cases; for
    graded scores with ``spread``, the sd of the current per-case scores, as the sd of a case's
    gain. A target whose answers vary from run to run needs a larger gain than this."""
    fail = 1.0 - current
    drop = minimal_detectable_drop(n_test, fail, case_sd=0.0 if binary else max(spread, 1e-9), binary=binary,
                                   alpha=alpha, power=power, window=1, two_sided=False) if fail > 0 else None
    if binary and math.ceil(math.log2(1.0 / alpha)) > n_test * fail + 1e-9:
        drop = None  # fewer failing cases than the exact test needs fixed: no gain can be shown
    mde = None if drop is None else drop * fail
    out = Power(n_test=n_test, use=use, alpha=alpha, current=current, source=source, power=power, mde=mde,
                min_gain=min_gain)
    if mde is None or mde > min_gain:
        out.warning = (f"the test split is too small to confirm the gain worth having ({min_gain:g}): "
                       + ("it can confirm no gain" if mde is None else f"it confirms only gains of {mde:.3f}")
                       + f" at alpha {alpha:.4g}; a useful revision will likely not be written — add held-out "
                         "cases (or a new holdout salt, a fresh test split)")
    return out


def current_estimate(per_case: Iterable[float] | None) -> tuple[float, bool, float, bool]:
    """The current mean score from per-case scores seen before (None or empty: 0.5, pass/fail — the
    widest spread), whether they are pass/fail, their sd, and whether there were any."""
    values = list(per_case or ())
    if not values:
        return 0.5, True, 0.5, False
    mean = sum(values) / len(values)
    spread = (sum((v - mean) ** 2 for v in values) / max(len(values) - 1, 1)) ** 0.5
    return mean, all(v in (0.0, 1.0) for v in values), spread, True
