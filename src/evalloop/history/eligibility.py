"""Which stored runs may serve as a baseline (what makes two runs' products or measurements differ:
:mod:`evalloop.history.identity`).

The single definition of baseline eligibility: verdicts (``HistoryStore.baseline_runs``),
reports and trends all ask :func:`baseline_eligible`. A scorer of a run is eligible when it
measured the suite (:func:`measured`: the run completed, is valid, ran every case — not
``--limit`` — and the scorer graded a case with a finite mean), its grades are trustworthy (not
``scorer broken`` nor ``invalid run``), its drop does not hold (a ``regressed`` verdict or a
significant drop of any size keeps it out only when the drop also holds against a *sound*
baseline, judged by :func:`evalloop.verdicts.baseline.compare_scorer`: no windup from a baseline
run that scored high by chance), and no incident of the scorer kept it out after the run (the
learning step clears the flag). So a lasting regression never drifts into its own baseline: the
baseline stays on the last good runs until the incident resolves, or until the change is
*accepted* (``evalloop accept``), which makes that run eligible whatever its verdict and the
oldest run any later baseline may reach back to. A scorer ``below floor`` stays eligible: it is
the normal, only not good enough. A baseline of a scorer holds only runs measured
as the current run is (same scorer code, parameters, judge model): a run graded otherwise enters
through its *bridge* — its stored outputs re-graded by the current measurement — or not at all.

The answer is stored on the summary when the run is judged (``eligible``), together with the
number of the rule that gave it (``details["eligibility_rule"]``, :data:`RULE`). A row judged by
an older version — no number, or a lower one (a history from f3594c2 stored ``eligible`` true for
its ``regressed`` runs) — is judged again here by the current rule on what the row holds (its
verdict, and whether its p-value showed a drop); it can only lose eligibility so (a run the
learning step kept out stays out). Bump :data:`RULE` whenever :func:`eligible_now` changes.
"""

from __future__ import annotations

import math

from evalloop.history.details import JSONValue, summary_details
from evalloop.history.identity import VOLATILE_KEYS, Fingerprint, stable
from evalloop.history.models import Run, RunStatus, ScorerSummary

__all__ = ["NOT_A_BASELINE", "RULE", "RULE_KEY", "VOLATILE_KEYS", "accepted", "base_fingerprint",
           "baseline_eligible", "eligible_now", "judged_by_rule", "measured", "measured_as", "of_measurement",
           "stored_significant_drop", "verdict_reason"]


#: verdicts that keep a run out of later baselines whatever else it shows: untrustworthy grades
NOT_A_BASELINE = frozenset({"scorer broken", "invalid run"})

#: the number of the eligibility rule (:func:`eligible_now`) this version judges by; stored on every
#: judged summary under :data:`RULE_KEY`. Rows without it, or with a lower one, are judged again.
RULE = 3
RULE_KEY = "eligibility_rule"


def accepted(summary: ScorerSummary) -> dict[str, JSONValue] | None:
    """The acceptance recorded on this scorer of a run (``evalloop accept``), if any: its
    ``accepted`` column says whether, its details what (reason, when, by whom)."""
    if not summary.accepted:
        return None
    found = summary_details(summary).accepted
    return None if found is None else found.model_dump()


def verdict_reason(summary: ScorerSummary) -> str:
    """The words a stored verdict was given (what the rule showed), as the run printed them."""
    evidence = summary.details.get("evidence")
    if not isinstance(evidence, dict) or not evidence.get("reason"):
        return ""
    return summary_details(summary).reason


def measured(run: Run, summary: ScorerSummary | None) -> bool:
    """Whether this scorer of a run measured the suite at all: the run completed, is valid, ran
    every case, and the scorer graded a case with a finite mean (whatever its verdict)."""
    return (summary is not None and run.status == RunStatus.COMPLETED and bool(run.valid) and not run.partial
            and not summary.skipped and summary.n > 0 and summary.mean is not None
            and math.isfinite(summary.mean))


def of_measurement(run: Run, summary: ScorerSummary, measurement: str | None) -> bool:
    """Whether a scorer of a run may stand beside runs measured as ``measurement`` says: measured
    the same way (:func:`measured_as`), and a bridge only of the measurement it was graded by."""
    if run.bridge_of is not None and (measurement is None or summary.measurement != measurement):
        return False
    return measured_as(summary, measurement)


def eligible_now(run: Run, summary: ScorerSummary, verdict: str | None, *, kept_out: bool | None = None) -> bool:
    """Whether a judged scorer of a finished run may serve as a later run's baseline.

    ``kept_out``: the run's drop — a ``regressed`` verdict, or a significant drop of any size
    (a ``watch``) — holds against a *sound* baseline (judged by
    :func:`evalloop.verdicts.baseline.compare_scorer`): such a run is no "good run", or a lasting
    drop would be absorbed into its own baseline a run at a time; a drop that does not hold there
    came from a baseline run that scored high by chance, and the run is a good run after all (no
    windup). ``None`` (a row judged by an older version): a ``regressed`` verdict keeps it out."""
    if not measured(run, summary) or verdict in NOT_A_BASELINE:
        return False
    if kept_out is None:
        return verdict != "regressed"
    return not kept_out


def measured_as(summary: ScorerSummary, measurement: str | None) -> bool:
    """Whether a scorer's stored scores were measured as ``measurement`` says (the same scorer
    code, parameters and judge model: :mod:`evalloop.history.identity`). Unknown on either side
    (a row of an older evalloop without a fingerprint) counts as the same."""
    return measurement is None or summary.measurement is None or summary.measurement == measurement


def judged_by_rule(summary: ScorerSummary) -> int:
    """The eligibility rule a summary was judged by (0: an older version's row, before rules were
    numbered). Read from the details as their column hands them over (a dict): every candidate of
    every baseline asks."""
    found = summary.details.get(RULE_KEY)
    return found if type(found) is int else 0


def stored_significant_drop(summary: ScorerSummary) -> bool:
    """Whether a stored verdict showed a significant drop (its p-value under the policy's alpha, the
    mean lower): what an older version's row says of the drop the current rule asks about."""
    if summary.p_value is None or summary.drop is None or summary.drop <= 0:
        return False
    return summary.p_value < summary_details(summary).alpha


def baseline_eligible(run: Run, summary: ScorerSummary | None, *, measurement: str | None = None) -> bool:
    """The one answer to "may this scorer of this run be part of a baseline?".

    With ``measurement``: of a run whose scorer is measured so — only runs measured the same way
    are (a run measured otherwise enters through its *bridge*, its outputs re-graded). A bridge
    is never a baseline but of the measurement it was graded by."""
    if summary is None or run.status != RunStatus.COMPLETED or not of_measurement(run, summary, measurement):
        return False
    if accepted(summary) is not None:
        return True
    if summary.eligible is not None and not summary.eligible:
        return False
    if summary.eligible is not None and judged_by_rule(summary) >= RULE:
        return bool(run.valid)
    # judged by an older version (or never): the current rule, on what the row holds (whether a
    # drop held against a sound baseline was not asked then: a regressed verdict or a significant
    # drop keeps the row out, as that version's own rule did)
    return eligible_now(run, summary, summary.verdict,
                        kept_out=summary.verdict == "regressed" or stored_significant_drop(summary))


def base_fingerprint(fingerprint: Fingerprint) -> Fingerprint:
    """The fingerprint without its volatile parts (case files, injected failure memories)."""
    return dict(stable(fingerprint))
