"""The learning step: a regression becomes a failure memory, found again to improve a prompt.

``learn`` turns every regression of a run into one memory in the ADR's format — eval name,
current, baseline, drop, the scorer context (which cases newly failed, capped), an action line
— tagged ``eval-failure,<suite>,regression`` with JSON metadata, written through a
:class:`~evalloop.memory.adapters.MemoryAdapter` (the embedded store by default, or the system
under test's own memory service). A failing store never fails the run: it is reported.
``failure_patterns`` / ``enhance_prompt`` find those memories again for a prompt revision.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from evalloop.baseline import Comparison, ScorerComparison
from evalloop.config import Settings
from evalloop.errors import ConfigError, EvalloopError
from evalloop.history.models import Run

MAX_CASES = 8
MAX_MESSAGE = 160
PATTERN_LIMIT = 3
HEADING = "Past failure patterns:"


class Learned(BaseModel):
    """What the learning step did for one regression."""

    scorer: str
    memory_id: str | None = None
    error: str | None = None


def failure_tags(suite: str) -> list[str]:
    return ["eval-failure", suite, "regression"]


def failure_information(run: Run, s: ScorerComparison) -> str:
    """The memory text of one regression, in the ADR's shape."""
    lines = [
        f'Eval "{run.suite}" regression detected ({s.scorer}, {s.kind}) in run {run.id}:',
        f"- Current score: {s.current:.2f}" if s.current is not None else "- Current score: n/a",
        f"- Baseline (rolling avg of {s.window_runs}): {s.baseline:.2f}" if s.baseline is not None
        else "- Baseline: n/a",
        f"- Drop: {s.drop:.1%}" if s.drop is not None else "- Drop: n/a",
    ]
    ev = s.evidence
    if ev is not None and ev.p_value is not None:
        lines.append(f"- Evidence: p={ev.p_value:.3g}{ev.stars} on {ev.n_paired} paired cases ({ev.test})")
    lines += ["", "Scorer context:", f"{s.scorer}: {s.n} graded cases, mean {s.current:.2f}"
              if s.current is not None else f"{s.scorer}: no graded cases"]
    if s.newly_failing:
        lines.append(f"Newly failing cases ({len(s.newly_failing)}):")
        for case, message in s.newly_failing[:MAX_CASES]:
            message = " ".join(message.split())
            message = message if len(message) <= MAX_MESSAGE else message[: MAX_MESSAGE - 1] + "…"
            lines.append(f"- {case}: {message}" if message else f"- {case}")
        if len(s.newly_failing) > MAX_CASES:
            lines.append(f"- … and {len(s.newly_failing) - MAX_CASES} more")
    lines += ["", f"Action: review the prompt and target behind {run.suite} ({s.scorer}); "
                  "the cases above regressed since the previous run."]
    return "\n".join(lines)


def failure_metadata(run: Run, s: ScorerComparison) -> dict[str, Any]:
    return {
        "eval_name": run.suite,
        "scorer": s.scorer,
        "baseline_score": s.baseline,
        "current_score": s.current,
        "drop_percentage": s.drop,
        "run_id": run.id,
        "code_version": run.code_version,
        "timestamp": (run.ended_at or run.started_at).isoformat(),
        "newly_failing": [case for case, _ in s.newly_failing[:50]],
    }


def open_adapter(settings: Settings) -> Any:
    """The memory adapter the settings name: the embedded store, or an HTTP memory service."""
    if settings.memory_url:
        from evalloop.memory.adapters import HTTPMemoryAdapter, HTTPMemoryConfig

        return HTTPMemoryAdapter(HTTPMemoryConfig(base_url=settings.memory_url, **settings.memory_http))
    from evalloop.errors import MEMORY_RECOVER, is_db_error, store_error
    from evalloop.memory.store import MemoryStore

    try:
        return MemoryStore(settings.memory_file)
    except Exception as exc:  # a damaged file: one line naming it, and the run goes on
        if not is_db_error(exc):
            raise
        raise store_error(exc, store="memory store", where=str(settings.memory_file),
                          recover=MEMORY_RECOVER) from None


def close_adapter(adapter: Any) -> None:
    close = getattr(adapter, "close", None)
    if close is not None:
        close()


def learn(comparison: Comparison, adapter: Any) -> list[Learned]:
    """Store one failure memory per regression of this run; failures are returned, not raised."""
    results = []
    for s in comparison.regressions:
        try:
            memory_id = adapter.store(failure_information(comparison.run, s),
                                      tags=failure_tags(comparison.run.suite),
                                      metadata=failure_metadata(comparison.run, s))
            results.append(Learned(scorer=s.scorer, memory_id=memory_id))
        except Exception as exc:  # noqa: BLE001 - a memory service failure never fails the run
            text = exc.one_line() if isinstance(exc, EvalloopError) else f"{type(exc).__name__}: {exc}"
            results.append(Learned(scorer=s.scorer, error=text))
    return results


def failure_patterns(adapter: Any, suite: str, query: str | None = None, limit: int = PATTERN_LIMIT) -> list[Any]:
    """The failure memories of a suite most related to ``query`` (default: "<suite> eval failure")."""
    return list(adapter.find(query or f"{suite} eval failure", limit=limit,
                             tags=["eval-failure", suite]))


def enhance_prompt(base: str, patterns: Sequence[Any]) -> str:
    """``base`` with a "Past failure patterns" section (unchanged when there are none)."""
    texts = [getattr(p, "information", None) or getattr(getattr(p, "record", None), "information", "")
             for p in patterns]
    texts = [t for t in texts if t]
    if not texts:
        return base
    return f"{base.rstrip()}\n\n{HEADING}\n" + "\n\n".join(texts) + "\n"


def patterns_text(settings: Settings, suite: str, limit: int = PATTERN_LIMIT) -> tuple[str | None, str | None]:
    """The failure-pattern text for a suite's prompts, and a notice if memories could not be read."""
    try:
        adapter = open_adapter(settings)
    except (EvalloopError, OSError) as exc:
        return None, f"failure memories not read: {exc}"
    try:
        found = failure_patterns(adapter, suite, limit=limit)
    except Exception as exc:  # noqa: BLE001 - prompts still work without past failures
        text = exc.one_line() if isinstance(exc, EvalloopError) else str(exc)
        return None, f"failure memories not read: {text}"
    finally:
        close_adapter(adapter)
    enhanced = enhance_prompt("", found).strip()
    return (enhanced.removeprefix(HEADING).strip() or None), None


def require_memories(settings: Settings) -> None:
    """Raise when the embedded memory file does not exist yet (nothing was ever learned)."""
    if not settings.memory_url and not settings.memory_file.exists():
        raise ConfigError("no memory store yet", where=str(settings.memory_file),
                          hint="memories are written when a run regresses; see `evalloop run --help`")
