"""Building a run's services: which engine runs the operations, and the LLM and judge clients.

With no API key, ``auto`` picks the local engine and judges are skipped, each said in one line;
asking for ``--engine llm`` without a key is an error that says how to fix it. LLM replies go
through the response cache under ``history/`` unless ``--no-cache``; ``--cache-only`` replays.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from evalloop.config import Settings
from evalloop.errors import ConfigError
from evalloop.run.context import Services

if TYPE_CHECKING:
    from evalloop.environ import Environment
    from evalloop.llm.cache import CacheMode

#: how the notice that no LLM is configured starts (shown only to suites that use one)
NO_LLM_NOTICE = "no ANTHROPIC_API_KEY (or EVALLOOP_LLM_BASE_URL)"

def build_services(
    settings: Settings,
    *,
    engine: str | None = None,
    model: str | None = None,
    cache: CacheMode | None = None,
    client: Any = None,
    concurrency: int | None = None,
    batch: bool = False,
) -> tuple[Services, list[str]]:
    """The services for a run, and one-line notices about what was chosen and why.

    The judge is the operations' client unless ``judge_model`` names another model of the same
    provider, or ``EVALLOOP_JUDGE_BASE_URL`` another (OpenAI-compatible) server. ``batch``: both
    send their calls through the provider's batch API (:mod:`evalloop.llm.batching`), under the
    response cache.
    """
    from evalloop.llm.clients import MISSING, client_from_env, judge_from_env

    engine = engine or settings.engine
    cache = cache or settings.cache
    if engine not in ("auto", "local", "llm"):
        raise ConfigError(f"unknown engine '{engine}'", hint="use --engine auto, local or llm")
    notices: list[str] = []
    options: dict[str, Any] = {}
    env = settings.env
    if env.llm_concurrency is None:  # the explicit LLM knob wins
        options["concurrency"] = concurrency or settings.concurrency
    if settings.prices:
        options["prices"] = settings.prices
    llm = client if client is not None else client_from_env(model or settings.model, env, **options)
    if llm is None and cache == "only":  # replay needs no key: the cache answers, or misses
        from evalloop.llm.cache import ReplayOnlyClient
        from evalloop.llm.types import DEFAULT_MODEL

        llm = ReplayOnlyClient(model or settings.model or DEFAULT_MODEL)
    judge = judge_from_env(settings.judge_model, env, **options)
    if judge is None and settings.judge_model and llm is not None and client is None:
        judge = client_from_env(settings.judge_model, env, **options)
    if llm is None and engine == "llm":
        raise ConfigError("--engine llm needs an LLM, and none is configured", where="environment", hint=MISSING)
    if batch:
        llm, judge, said = _batched(llm, judge, env)
        notices += said
    if cache != "off":
        from evalloop.llm.cache import CachedClient

        path = settings.cache_file
        llm = CachedClient(llm, path, mode=cache) if llm is not None else None
        judge = CachedClient(judge, path, mode=cache) if judge is not None else None
        notices += sorted({c.notice for c in (llm, judge) if c is not None and c.notice})  # a damaged cache
    judge = judge or llm
    if llm is None:
        notices.append(NO_LLM_NOTICE + ": memory operations run on the local engine"
                       + ("" if judge is not None else "; LLM judges are skipped"))
        return Services(engine="local", judge=judge), notices
    chosen = "llm" if engine in ("auto", "llm") else "local"
    return Services(engine=chosen, llm=llm if chosen == "llm" else None, judge=judge), notices


def _batched(llm: Any, judge: Any, env: Environment) -> tuple[Any, Any, list[str]]:
    """The operations' and the judge's clients in batch mode (one wrapper for a shared client)."""
    from evalloop.llm.batching import batching
    from evalloop.llm.cache import ReplayOnlyClient

    notices: list[str] = []
    done: dict[int, Any] = {}
    clients = []
    for client in (llm, judge):
        if client is None or isinstance(client, ReplayOnlyClient):  # a replay asks nobody
            clients.append(client)
            continue
        if id(client) not in done:
            wrapped = batching(client, env)
            if wrapped is None:
                notices.append(f"batch mode: the {client.name} client has no batch API in evalloop; "
                               "its calls are made live at full price")
            done[id(client)] = wrapped or client
        clients.append(done[id(client)])
    return clients[0], clients[1], notices


async def close_services(services: Services) -> None:
    """Close the clients a run opened (the cache is shared by the operation and the judge)."""
    seen: set[int] = set()
    for client in (services.llm, services.judge):
        if client is not None and id(client) not in seen:
            seen.add(id(client))
            close = getattr(client, "aclose", None)
            if close is not None:
                await close()
