"""The LLM client layer: protocol, Anthropic and OpenAI-compatible clients, cache, cost, usage,
prompt caching, batch APIs and the cost budget.

Names are imported on first use, so that importing one part (``evalloop.llm.usage``) does not
load the Anthropic SDK.
"""

from __future__ import annotations

from evalloop.lazy import lazy_exports

# Light modules, imported now (``structured`` is also a submodule's name: bind the function).
from evalloop.llm.structured import parse_json_reply as parse_json_reply
from evalloop.llm.structured import structured as structured
from evalloop.llm.structured import tool_for as tool_for
from evalloop.llm.usage import UsageTotals as UsageTotals
from evalloop.llm.usage import record_usage as record_usage
from evalloop.llm.usage import usage_scope as usage_scope

_EXPORTS = {
    "AnthropicClient": "evalloop.llm.anthropic_client",
    "BatchingClient": "evalloop.llm.batching",
    "Budget": "evalloop.llm.budget",
    "BudgetExceeded": "evalloop.llm.errors",
    "CacheMode": "evalloop.llm.cache",
    "CachedClient": "evalloop.llm.cache",
    "DEFAULT_MODEL": "evalloop.llm.types",
    "LLMCallFailed": "evalloop.llm.errors",
    "LLMClient": "evalloop.llm.types",
    "LLMConnectionFailed": "evalloop.llm.errors",
    "LLMError": "evalloop.llm.errors",
    "LLMRequest": "evalloop.llm.types",
    "LLMResponse": "evalloop.llm.types",
    "Message": "evalloop.llm.types",
    "OpenAICompatClient": "evalloop.llm.openai_client",
    "PRICES": "evalloop.llm.pricing",
    "Price": "evalloop.llm.pricing",
    "RefusalError": "evalloop.llm.errors",
    "ReplyParseError": "evalloop.llm.errors",
    "ResponseCache": "evalloop.llm.cache",
    "RetryPolicy": "evalloop.llm.retry",
    "TokenUsage": "evalloop.llm.types",
    "ToolSpec": "evalloop.llm.types",
    "UsageTotals": "evalloop.llm.usage",
    "cache_key": "evalloop.llm.cache",
    "client_from_env": "evalloop.llm.clients",
    "cost_usd": "evalloop.llm.pricing",
    "parse_json_reply": "evalloop.llm.structured",
    "min_cacheable": "evalloop.llm.pricing",
    "price_for": "evalloop.llm.pricing",
    "price_table": "evalloop.llm.pricing",
    "record_usage": "evalloop.llm.usage",
    "require_client": "evalloop.llm.clients",
    "structured": "evalloop.llm.structured",
    "tool_for": "evalloop.llm.structured",
    "usage_scope": "evalloop.llm.usage",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
