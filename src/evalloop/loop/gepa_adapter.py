"""evalloop as GEPA sees it: the adapter that evaluates a candidate prompt and builds the
reflective dataset, the reflection model through evalloop's LLM layer, and the stop conditions
and progress of the search.

GEPA (the ``gepa`` package) runs the search — reflective mutation on train minibatches, the
Pareto frontier of candidates per validation case, merges, the budget in metric calls, its state
in a run folder. It is synchronous: it runs in a worker thread, and every evaluation and every
reflection call is a coroutine handed back to the event loop the revision runs in
(:class:`Bridge`), so the runner, the LLM clients, the response cache, the cost accounting and
the cost budget are the ones a run uses.

The reflective dataset shows, for each case of a minibatch, lowest score first: the case's input
and expected answer, the output the candidate got (or the target's error), its score and every
scorer's feedback (a judge's rationale included) — each fenced (:func:`evalloop.untrusted.fence`),
and what a learn case's output quotes of a held-out case redacted. The incident's lesson, when the
revision starts from one, is in the reflection prompt itself (:func:`reflection_template`).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, TypeVar

from evalloop.llm.types import LLMRequest, Message
from evalloop.loop.revise_eval import CandidateCase, Evaluator, case_text
from evalloop.suites.models import Case
from evalloop.untrusted import FENCE_NOTE, fence

T = TypeVar("T")

COMPONENT = "prompt"
#: characters of a case's input, expected answer or output shown to the reflecting model
SHOWN_CHARS = 4000

REFLECT_SYSTEM = (
    "You revise the system prompt of an LLM-powered task from evidence: cases it was graded on, "
    "with their inputs, expected answers, the answers it gave and the graders' feedback. "
    + FENCE_NOTE)

_TEMPLATE = """This is the system prompt of an LLM-powered task, as it is now:
--- current prompt ---
<curr_param>
--- end of the current prompt ---
{lesson}
These are cases the task answered with that prompt, the lowest scores first: each case's input, \
its expected answer, the answer the task gave, its score (1 is best) and the graders' feedback.

<side_info>

Find the general rule the low-scoring cases share that the prompt misses or gets wrong. Write \
the complete revised prompt: keep what already works, state the rule so that cases like these — \
and cases never shown — get their expected answers, and do not copy cases into it. Reply with \
the revised prompt alone, between two lines of three backticks (```)."""


def reflection_template(lesson: str | None) -> str:
    """The reflection prompt GEPA fills in (``<curr_param>``: the prompt; ``<side_info>``: the
    reflective dataset), with the incident's lesson (already fenced) when there is one."""
    text = ""
    if lesson:
        safe = lesson.replace("<curr_param>", "[curr_param]").replace("<side_info>", "[side_info]")
        text = ("\nWhat the suite's open incident says about its recent failures (its lesson, from cases "
                f"like those below):\n{safe}\n")
    return _TEMPLATE.replace("{lesson}", text)


class Stopped(Exception):
    """The revision was interrupted: the search ends at its next evaluation or reflection."""


class Bridge:
    """Runs coroutines on the revision's event loop from GEPA's worker thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.stop = threading.Event()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        if self.stop.is_set():
            coro.close()
            raise Stopped("the revision was interrupted")
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()


class EvalloopAdapter:
    """GEPA's adapter over an :class:`Evaluator`: a data instance is a case id; a candidate is
    ``{"prompt": text}``; an output is the case's :class:`CandidateCase` as a dict (picklable, for
    GEPA's saved state); a trajectory is the same dict, which the reflective dataset reads."""

    propose_new_texts = None  # GEPA's own reflective proposal, with the reflection model below

    def __init__(self, evaluator: Evaluator, bridge: Bridge, cases: Mapping[str, Case]) -> None:
        self.evaluator, self.bridge, self.cases = evaluator, bridge, cases

    def evaluate(self, batch: list[str], candidate: dict[str, str], capture_traces: bool = False) -> Any:
        from gepa.core.adapter import EvaluationBatch

        # every case counts as a metric call, remembered or not: the budget bounds the iterations
        results = self.bridge.run(self.evaluator.evaluate(candidate[COMPONENT], batch))
        rows = [r.model_dump() for r in results]
        return EvaluationBatch(outputs=rows, scores=[r.score for r in results],
                               trajectories=rows if capture_traces else None,
                               objective_scores=[{k: v for k, v in r.scores.items() if v is not None}
                                                 for r in results])

    def make_reflective_dataset(self, candidate: dict[str, str], eval_batch: Any,
                                components_to_update: list[str]) -> dict[str, list[dict[str, Any]]]:
        rows = sorted(eval_batch.trajectories or [], key=lambda r: r["score"])
        return {name: [self.record(CandidateCase.model_validate(r)) for r in rows] for name in components_to_update}

    def record(self, result: CandidateCase) -> dict[str, Any]:
        """What the reflecting model is shown of one graded case."""
        case = self.cases[result.id]
        got = result.output if result.error is None else f"(no answer: {result.error})"
        return {"Case": result.id,
                "Input": fence("INPUT", case_text(case.input)[:SHOWN_CHARS]),
                "Expected answer": fence("EXPECTED", case_text(case.expected)[:SHOWN_CHARS]),
                "Answer given": fence("OUTPUT", (got or "")[:SHOWN_CHARS]),
                "Score": f"{result.score:.2f}",
                "Feedback": fence("FEEDBACK", result.feedback or "(no message)")}


class Reflector:
    """GEPA's reflection model (a ``LanguageModel``: prompt in, text out) through evalloop's LLM
    client: the response cache, retries, token and cost accounting and the cost budget apply."""

    def __init__(self, client: Any, model: str | None, bridge: Bridge, max_tokens: int = 4096) -> None:
        self.client, self.bridge, self.max_tokens = client, bridge, max_tokens
        self.model = model or client.model
        self.calls = 0
        self.total_cost = 0.0

    def __call__(self, prompt: str | list[dict[str, Any]]) -> str:
        text = prompt if isinstance(prompt, str) else "\n\n".join(_content(m) for m in prompt)
        request = LLMRequest(model=self.model, system=REFLECT_SYSTEM, max_tokens=self.max_tokens,
                             messages=[Message(role="user", content=text)])
        response = self.bridge.run(self.client.complete(request))
        self.calls += 1
        self.total_cost += response.cost_usd
        return response.text


def _content(message: Mapping[str, Any]) -> str:
    content = message.get("content", "")
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    return str(content)


class CostStop:
    """Stops the search once what the revision spent, plus what the confirmation is expected to
    cost, reaches ``limit`` (USD): the confirmation is paid for before the search spends it."""

    def __init__(self, limit: float, spent: Callable[[], float], reserve: Callable[[], float]) -> None:
        self.limit, self.spent, self.reserve = limit, spent, reserve
        self.fired = False

    def __call__(self, state: Any) -> bool:
        self.fired = self.fired or self.spent() + self.reserve() >= self.limit
        return self.fired


class PerfectStop:
    """Stops the search once a candidate scores 1 on every validation case: nothing is left to find."""

    def __call__(self, state: Any) -> bool:
        scores = state.program_full_scores_val_set
        return bool(scores) and max(scores) >= 1.0


class FlagStop:
    """Stops the search when the revision is interrupted."""

    def __init__(self, bridge: Bridge) -> None:
        self.bridge = bridge

    def __call__(self, state: Any) -> bool:
        return self.bridge.stop.is_set()


class Progress:
    """A GEPA callback that says how the search goes, one line per iteration: metric calls of the
    budget, what was spent, candidates, the best mean score on the validation split."""

    def __init__(self, say: Callable[[str], None], budget: int, spent: Callable[[], float]) -> None:
        self.say, self.budget, self.spent = say, budget, spent

    def on_iteration_end(self, event: Mapping[str, Any]) -> None:
        state = event["state"]
        scores: Sequence[float] = state.program_full_scores_val_set
        best = max(range(len(scores)), key=lambda i: scores[i]) if scores else 0
        self.say(f"search: iteration {event['iteration']} · {state.total_num_evals}/{self.budget} metric calls · "
                 f"${self.spent():.4f} · {len(scores)} candidate(s); best on validation {scores[best]:.3f}"
                 + (" (the current prompt)" if best == 0 else f" (candidate {best})"))


class FileLog:
    """GEPA's log lines to a file in its run folder (GEPA's own file logger replaces the process's
    stdout and stderr while it runs, which a command printing JSON cannot have)."""

    def __init__(self, path: Any) -> None:
        self.path = path

    def log(self, message: str) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(f"{message}\n")
