"""The cost budget of a run (``--max-cost``): no LLM call starts once its estimate would pass it.

The runner opens a :class:`Budget` for the run (:func:`budget_scope`); every call of evalloop's
clients goes through :func:`within_budget`, which reserves the call's estimated cost before it
starts and settles it with what the reply actually cost. A call whose estimate would take spent +
reserved past the limit raises :class:`BudgetExceeded` instead of starting: the runner then
starts no new case, lets the cases in flight finish (their further calls are refused alike), and
marks the run invalid, saying what it spent. The overshoot is at most what the calls in flight
cost beyond their estimates: one in-flight window.

A call's estimate is the mean actual cost of the calls of the same model and tool so far; before
the first reply, the request's size (4 characters a token, the prefix as a cache write) and its
``max_tokens`` as output — an upper bound, so the budget errs on the side of stopping.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from evalloop.llm.errors import BudgetExceeded
from evalloop.llm.pricing import BATCH, CACHE_WRITE, Price, estimate_tokens, price_for
from evalloop.llm.prompt_cache import prefix_tokens
from evalloop.llm.types import LLMRequest, LLMResponse

_BUDGET: ContextVar[Budget | None] = ContextVar("evalloop_budget", default=None)


@dataclass
class Budget:
    """What a run may spend (USD), what it spent, and what the calls in flight may still cost."""

    limit: float
    spent: float = 0.0
    reserved: float = 0.0
    refused: int = 0
    _means: dict[tuple[str, str], tuple[float, int]] = field(default_factory=dict)

    @property
    def exceeded(self) -> bool:
        """Whether a call was refused (the run stopped starting new work)."""
        return self.refused > 0

    def estimate(self, request: LLMRequest, price: Price | None, batch: bool = False) -> float:
        """What ``request`` is expected to cost (see the module's note)."""
        mean = self._means.get(_kind(request))
        if mean is not None:
            return mean[0] / mean[1]
        if price is None:
            return 0.0
        prefix = prefix_tokens(request)
        rest = estimate_tokens("".join(m.content for m in request.messages))
        tokens_in = rest + (CACHE_WRITE * prefix if request.cache_prefix else prefix)
        cost = (tokens_in * price.input_per_mtok + request.max_tokens * price.output_per_mtok) / 1_000_000
        return cost * BATCH if batch else cost

    def reserve(self, request: LLMRequest, price: Price | None, batch: bool = False) -> float:
        """Hold the estimate of one call, or raise :class:`BudgetExceeded` when it would pass the limit."""
        cost = self.estimate(request, price, batch)
        if self.refused or self.spent + self.reserved + cost > self.limit:
            self.refused += 1
            raise BudgetExceeded(
                f"the run's cost budget is spent: ${self.spent:.4f} of ${self.limit:.4f} "
                f"(${self.reserved:.4f} in flight; the next call would cost about ${cost:.4f})",
                where="--max-cost", hint="raise --max-cost (or max_cost in the suite), or run fewer cases")
        self.reserved += cost
        return cost

    def settle(self, held: float, request: LLMRequest, response: LLMResponse | None) -> None:
        """Replace a reservation with what the call cost (nothing when it failed or was served
        from the response cache)."""
        self.reserved = max(self.reserved - held, 0.0)
        if response is None or response.cached:
            return
        self.spent += response.cost_usd
        total, count = self._means.get(_kind(request), (0.0, 0))
        self._means[_kind(request)] = (total + response.cost_usd, count + 1)

    def describe(self) -> str:
        """The one line an over-budget run is marked invalid with."""
        return f"stopped at the cost budget: spent ${self.spent:.4f} of --max-cost ${self.limit:.4f}"


def _kind(request: LLMRequest) -> tuple[str, str]:
    return request.model, request.tool.name if request.tool else ""


def current_budget() -> Budget | None:
    """The budget of the run this code runs in, if it has one."""
    return _BUDGET.get()


@contextmanager
def budget_scope(limit: float | None) -> Iterator[Budget | None]:
    """Give the calls made inside (tasks spawned inside included) a budget of ``limit`` USD;
    ``None``: no budget."""
    if limit is None:
        yield None
        return
    budget = Budget(limit)
    token = _BUDGET.set(budget)
    try:
        yield budget
    finally:
        _BUDGET.reset(token)


async def within_budget(request: LLMRequest, prices: Mapping[str, Price],
                        call: Callable[[], Awaitable[LLMResponse]], *, batch: bool = False) -> LLMResponse:
    """``call()`` (one request's call) under the run's budget, when there is one."""
    budget = _BUDGET.get()
    if budget is None:
        return await call()
    held = budget.reserve(request, price_for(request.model, prices), batch)
    response: LLMResponse | None = None
    try:
        response = await call()
        return response
    finally:
        budget.settle(held, request, response)
