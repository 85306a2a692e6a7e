"""The search of a prompt revision: ``gepa.optimize`` on the train and validation splits, in a
worker thread, within the budgets; what it found, read back from its saved state.

GEPA saves its state (``gepa_state.bin``: every candidate, its validation scores, the Pareto
frontier, the metric calls spent) in the run folder at the start of every iteration and at the
end. The outcome is always read from there, so a search stopped by the cost budget, an error or
an interruption still yields the best candidate it had found, and ``--resume`` continues it
(``--max-metric-calls`` is then the new total). The search stops at the budget in metric calls
(GEPA checks it between iterations: an iteration under way finishes, at most two minibatches and
one validation pass over), at ``--max-cost`` less what the confirmation is expected to cost, or
on interruption (Ctrl-C; a ``gepa.stop`` file in the run folder does the same).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, cast

from pydantic import BaseModel, Field

from evalloop.config import RevisionSettings
from evalloop.llm.errors import BudgetExceeded
from evalloop.loop.gepa_adapter import (
    COMPONENT,
    Bridge,
    CostStop,
    EvalloopAdapter,
    FileLog,
    FlagStop,
    PerfectStop,
    Progress,
    Reflector,
    Stopped,
    reflection_template,
)
from evalloop.loop.revise_eval import Evaluator
from evalloop.loop.revise_plan import Splits
from evalloop.suites.models import Case

BUDGET, COST, SPENT, INTERRUPTED, PERFECT = ("metric calls", "cost budget", "cost budget spent", "interrupted",
                                             "a perfect validation score")


class Search(BaseModel):
    """What the search did and found."""

    run_dir: str
    resumed: bool = False
    metric_calls: int = 0
    max_metric_calls: int = 0
    target_calls: int = Field(0, description="case evaluations actually run (the rest were remembered)")
    iterations: int = 0
    candidates: int = 0
    best: int = Field(0, description="the candidate ranked best on the validation split (0: the current prompt)")
    validation: dict[str, float] = Field(default_factory=dict, description="mean score: current, best")
    frontier: int = Field(0, description="distinct candidates on the validation split's Pareto frontier")
    reflections: int = 0
    stopped: str = BUDGET
    cost_usd: float = 0.0


async def search(evaluator: Evaluator, splits: Splits, prompt: str, *, cases: Mapping[str, Case], lesson: str | None,
                 client: Any, model: str | None, opts: RevisionSettings, budget: int, run_dir: Path, resume: bool,
                 spent: Callable[[], float], say: Callable[[str], None]) -> tuple[Search, str]:
    """Run GEPA from ``prompt``; the search's summary and the best candidate's text."""
    import gepa

    bridge = Bridge(asyncio.get_running_loop())
    reflector = Reflector(client, model, bridge)
    adapter = EvalloopAdapter(evaluator, bridge, cases)
    stops: list[Any] = [FlagStop(bridge), PerfectStop()]
    cost: CostStop | None = None
    if opts.max_cost is not None:
        n_test = len(splits.test)
        cost = CostStop(opts.max_cost, spent, lambda: 2 * n_test * evaluator.spent / max(evaluator.fresh, 1))
        stops.append(cost)

    def work() -> None:
        gepa.optimize(
            seed_candidate={COMPONENT: prompt}, trainset=list(splits.train), valset=list(splits.validation),
            adapter=cast(Any, adapter), reflection_lm=reflector, reflection_prompt_template=reflection_template(lesson),
            candidate_selection_strategy="pareto", reflection_minibatch_size=opts.minibatch, use_merge=opts.merge,
            max_metric_calls=budget, stop_callbacks=stops, logger=FileLog(run_dir / "gepa.log"),
            run_dir=str(run_dir), callbacks=[cast(Any, Progress(say, budget, spent))], track_best_outputs=False,
            seed=opts.seed, raise_on_exception=True, skip_perfect_score=True, perfect_score=1.0)

    stopped = BUDGET
    try:
        await asyncio.to_thread(work)
    except BudgetExceeded as exc:
        stopped = SPENT
        say(f"search stopped: {exc.what}")
    except Stopped:
        stopped = INTERRUPTED
    except (asyncio.CancelledError, KeyboardInterrupt):
        bridge.stop.set()
        (run_dir / "gepa.stop").touch()
        raise
    found, best = _read_state(run_dir, prompt)
    if stopped == BUDGET and found.get("validation", {}).get("best", 0.0) >= 1.0:
        stopped = PERFECT
    elif stopped == BUDGET and cost is not None and cost.fired:
        stopped = COST
    elif stopped == BUDGET and bridge.stop.is_set():
        stopped = INTERRUPTED
    found.update(resumed=resume, max_metric_calls=budget, target_calls=evaluator.fresh, reflections=reflector.calls,
                 stopped=stopped, cost_usd=spent())
    return Search(run_dir=str(run_dir), **found), best


def _read_state(run_dir: Path, prompt: str) -> tuple[dict[str, Any], str]:
    """The search's saved state: its counts and the best candidate on the validation split (the
    current prompt when nothing was saved yet, or nothing beat it; ties go to the current prompt)."""
    if not (run_dir / "gepa_state.bin").is_file():
        return {}, prompt
    from gepa.core.state import GEPAState

    state: GEPAState[Any, Any] = GEPAState.load(str(run_dir))
    scores = list(state.program_full_scores_val_set)
    best = max(range(len(scores)), key=lambda i: (scores[i], -i)) if scores else 0
    on_front = {p for front in state.program_at_pareto_front_valset.values() for p in front}
    text = state.program_candidates[best][COMPONENT] if scores else prompt
    return {"metric_calls": state.total_num_evals, "iterations": max(state.i + 1, 0),
            "candidates": len(state.program_candidates), "best": best,
            "validation": {"current": scores[0], "best": scores[best]} if scores else {},
            "frontier": len(on_front)}, text
