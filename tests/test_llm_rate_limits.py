"""Provider rate limits: one limiter per provider, endpoint and key, shared by every client, that
slows the calls down on a 429 and paces them by the rate-limit headers.

The real clients (the ``anthropic`` SDK, httpx) against the loopback server, which sends the
headers and 429s. Timings are only ever lower bounds: a request the limiter held arrives at the
server no earlier than the hold's end, whatever the machine's load. The rule itself is a small
state machine, held to a reference model by Hypothesis.
"""

from __future__ import annotations

import asyncio
import math
import time
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalloop.llm import AnthropicClient, LLMRequest, Message, OpenAICompatClient
from evalloop.llm.ratelimit import MAX_WAIT, RateState, limiter_for, rate_headers
from support.messages_server import LLMServer, Reply
from support.ratelimits import Quota

HAIKU = "claude-haiku-4-5"


def _ask(i: int = 0, model: str = HAIKU) -> LLMRequest:
    return LLMRequest(model=model, messages=[Message(role="user", content=f"question {i}")])


def _client(kind: str, server: LLMServer, key: str = "key-a", **options):
    if kind == "anthropic":
        return AnthropicClient(api_key=key, base_url=server.url, **options)
    return OpenAICompatClient(server.openai_url, HAIKU, api_key=key, **options)


def _spent(kind: str, seconds: float) -> dict[str, str]:
    """Headers of a reply that spent the last request of a one-request budget, full in ``seconds``."""
    if kind == "openai":
        return {"x-ratelimit-limit-requests": "1", "x-ratelimit-remaining-requests": "0",
                "x-ratelimit-reset-requests": f"{seconds * 1000:.0f}ms"}
    full = datetime.fromtimestamp(time.time() + seconds, tz=UTC).isoformat().replace("+00:00", "Z")
    return {"anthropic-ratelimit-requests-limit": "1", "anthropic-ratelimit-requests-remaining": "0",
            "anthropic-ratelimit-requests-reset": full}


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
async def test_a_spent_request_budget_holds_the_next_call_until_it_refills(kind):
    with LLMServer() as server:
        scripted = time.monotonic()
        server.script(Reply(text="first", headers=_spent(kind, 0.5)))
        client = _client(kind, server, key=f"spent-{kind}")
        first = await client.complete(_ask(0))
        await client.complete(_ask(1))
        await client.aclose()
    assert first.text == "first"
    # one request refills in 0.5 s (the bucket's limit over its time to full): not sent before
    assert server.requests[1].at - scripted >= 0.49


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
async def test_a_429_holds_every_client_of_the_key_for_its_retry_after(kind):
    with LLMServer() as server:
        server.script(Reply.rate_limited(retry_after=0.5))
        first, second = _client(kind, server, key=f"shared-{kind}"), _client(kind, server, key=f"shared-{kind}")
        assert first.limiter is second.limiter  # two suites' clients, one provider key: one limiter
        limiter = first.limiter
        retried = asyncio.create_task(first.complete(_ask(0)))
        while limiter.state.hold_until <= time.monotonic() and not retried.done():
            await asyncio.sleep(0.001)  # until the 429 is in: the hold is set
        held_until = limiter.state.hold_until
        await second.complete(_ask(1))
        reply = await retried
        await first.aclose()
        await second.aclose()
    assert reply.retries == 1 and limiter.state.throttled == 1
    assert all(seen.at >= held_until for seen in server.requests[1:])  # neither client sent during the hold
    assert limiter.state.limit < 8  # halved from the clients' concurrency (8), two successes added since


def test_one_limiter_per_provider_endpoint_and_key():
    a = limiter_for("anthropic", "http://127.0.0.1:1", "k1", 8)
    assert limiter_for("anthropic", "http://127.0.0.1:1", "k1", 16) is a and a.state.ceiling == 16
    assert limiter_for("anthropic", "http://127.0.0.1:1", "k2", 8) is not a
    assert limiter_for("openai-compat", "http://127.0.0.1:1", "k1", 8) is not a
    assert limiter_for("anthropic", "http://127.0.0.1:2", "k1", 8) is not a
    assert "k1" not in a.name  # the key is kept as a hash


def test_both_spellings_of_the_headers_are_read():
    anthropic = rate_headers({"anthropic-ratelimit-requests-limit": "50",
                              "anthropic-ratelimit-requests-remaining": "49",
                              "anthropic-ratelimit-input-tokens-limit": "30000",
                              "anthropic-ratelimit-input-tokens-remaining": "29000",
                              "anthropic-ratelimit-input-tokens-reset": "2000-01-01T00:00:00Z"})
    assert anthropic["requests"][:2] == (50.0, 49.0) and anthropic["requests"][2] is None
    assert anthropic["input-tokens"] == (30000.0, 29000.0, 0.0)  # a reset in the past: full now
    openai = rate_headers({"x-ratelimit-limit-requests": "60", "x-ratelimit-remaining-requests": "59",
                           "x-ratelimit-reset-requests": "1s", "x-ratelimit-limit-tokens": "150000",
                           "x-ratelimit-remaining-tokens": "149984", "x-ratelimit-reset-tokens": "6m0s"})
    assert openai == {"requests": (60.0, 59.0, 1.0), "tokens": (150000.0, 149984.0, 360.0)}
    assert rate_headers({"content-type": "application/json"}) == {}


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
async def test_calls_against_a_request_quota_are_all_answered(kind):
    # the loopback server as a provider: a bucket of 6 requests refilled over 0.6 s, 429s past it
    with LLMServer(Quota(limit=6, period=0.6)) as server:
        client = _client(kind, server, key=f"quota-{kind}", concurrency=8, max_retries=8)
        replies = await asyncio.gather(*(client.complete(_ask(i)) for i in range(24)))
        await client.aclose()
    assert [r.text for r in replies] == ["ok"] * 24


# -- the rule against a reference model ---------------------------------------------------------
class Reference:
    """The concurrency part of the rule, as the docs say it: a call starts when no hold is on and
    fewer than ⌊limit⌋ are in flight; a 429 halves the limit (not below 1) unless a cut came after
    the call started, and holds new calls for its retry-after; a success adds 1/limit, up to the
    ceiling."""

    def __init__(self, ceiling: int) -> None:
        self.ceiling, self.limit, self.flight, self.hold, self.cut = ceiling, float(ceiling), [], 0.0, -math.inf

    def start(self, now: float) -> bool:
        if now < self.hold or len(self.flight) >= int(self.limit):
            return False
        self.flight.append(now)
        return True

    def end(self, now: float, which: int, throttled: bool, retry_after: float | None) -> None:
        started = self.flight.pop(which)
        if throttled:
            if started >= self.cut:
                self.limit, self.cut = max(1.0, self.limit / 2), now
            if retry_after is not None:
                self.hold = max(self.hold, now + min(retry_after, MAX_WAIT))
        else:
            self.limit = min(float(self.ceiling), self.limit + 1 / self.limit)


_step = st.one_of(st.tuples(st.just("start")),
                  st.tuples(st.just("end"), st.integers(0, 40), st.booleans(),
                            st.one_of(st.none(), st.sampled_from([0.0, 0.5, 3.0]))))


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 8), st.lists(st.tuples(st.floats(0, 2), _step), max_size=60))
def test_the_rule_matches_its_reference_model(ceiling, steps):
    state, model, now = RateState(ceiling), Reference(ceiling), 0.0
    flight: list[float] = []
    for gap, step in steps:
        now += gap
        if step[0] == "start":
            admitted = state.admit(now) == 0.0
            assert admitted == model.start(now)
            if admitted:
                flight.append(now)
        elif flight:
            which = step[1] % len(flight)
            _, _, throttled, retry_after = step
            state.ended(now, flight.pop(which), 429 if throttled else None, retry_after,
                        None if throttled else {"tokens": 10})
            model.end(now, which, throttled, retry_after)
        assert (state.limit, state.in_flight) == (model.limit, len(model.flight))
        assert state.hold_until == max(model.hold, 0.0)
        assert 1.0 <= state.limit <= ceiling
