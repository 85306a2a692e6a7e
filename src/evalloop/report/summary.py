"""The machine-readable summary of a run: one JSON-able dict, used by ``--json`` and reports."""

from __future__ import annotations

from typing import Any

from evalloop.loop.pipeline import RunReport


def run_summary(report: RunReport) -> dict[str, Any]:
    """Everything a CI job or a dashboard needs to know about one run, without bulky outputs."""
    run = report.outcome.run
    return {
        "run_id": run.id,
        "suite": run.suite,
        "status": run.status,
        "valid": run.valid,
        "invalid_reason": run.invalid_reason,
        "started_at": run.started_at.isoformat(),
        "ended_at": run.ended_at.isoformat() if run.ended_at else None,
        "code_version": run.code_version,
        "fingerprint": run.system_fingerprint,
        "n_cases": run.n_cases,
        "epochs": run.epochs,
        "case_errors": report.outcome.case_errors,
        "cost_usd": round(run.cost_usd, 6),
        "tokens": {"input": run.input_tokens, "output": run.output_tokens,
                   "cache_write": run.cache_write_tokens or 0, "cache_read": run.cache_read_tokens or 0},
        "llm_calls": run.llm_calls,
        "batched_calls": run.batched_calls or 0,
        "cache_hits": run.cache_hits,
        "llm_retries": run.llm_retries,
        "verdict": worst.value if (worst := report.comparison.worst) else None,
        "fails": report.comparison.fails,
        "regression": report.comparison.has_regression,
        "watch": bool(report.comparison.watches),
        "fingerprint_change": _change(report),
        "target_failures": _failures(report),
        "scorers": [
            {
                "scorer": s.scorer,
                "kind": s.kind,
                "current": s.current,
                "n": s.n,
                "errored": s.errored,
                "skipped": s.skipped,
                "baseline": s.baseline,
                "window_runs": s.window_runs,
                "drop": s.drop,
                "threshold": s.threshold,
                "verdict": s.verdict,
                "fails": s.fails,
                "regression": s.is_regression,
                "p_value": s.p_value,
                "mdd": s.mdd,
                "grades": s.grades,
                "reason": s.reason,
                "first_error": s.first_error or None,
                "newly_failing": [{"case": c, "message": m} for c, m in s.newly_failing],
                "newly_passing": s.newly_passing,
                "expected_failures_passed": _expected_failures_passed(report, s.scorer),
                "evidence": s.evidence.model_dump(
                    mode="json", exclude={"newly_failing", "newly_passing", "status"})
                if s.evidence else None,
            }
            for s in report.comparison.scorers
        ],
        "notices": report.notices,
        "bridge": None,  # the baseline runs re-graded for a changed measurement, and their cost (extras)
        **report.extras,
    }


def _expected_failures_passed(report: RunReport, scorer: str) -> list[str]:
    """The known-bad cases that ran through the target and passed (see ScorerResult)."""
    result = report.outcome.results.get(scorer)
    return result.expected_failures_passed if result is not None else []


def _failures(report: RunReport) -> dict[str, Any] | None:
    rate = report.comparison.target_failures
    if rate is None:
        return None
    return {"failures": rate.failures, "results": rate.results, "rate": rate.rate,
            "baseline_rate": rate.baseline_rate}


def _change(report: RunReport) -> dict[str, Any] | None:
    change = report.comparison.fingerprint_change
    if change is None:
        return None
    return {"previous_run": change.previous_run, "changed": change.changed, "restarted": change.restarted,
            "product": change.product, "measurement": change.measurement, "bridged": change.bridged}
