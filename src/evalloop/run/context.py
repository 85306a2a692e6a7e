"""The context handed to targets and scorers that ask for it (a ``ctx`` parameter)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from evalloop.suites.models import Case


@dataclass
class Services:
    """Shared, lazily built resources for one run: LLM client, engine choice, embedder, extras."""

    engine: str = "local"
    llm: Any = None
    judge: Any = None
    embedder: Any = None
    extras: dict[str, Any] = field(default_factory=dict)


@dataclass
class CaseContext:
    """What a target or scorer may want to know about the case it is working on."""

    suite: str
    run_id: str
    case: Case
    epoch: int
    services: Services

    @property
    def engine(self) -> str:
        return self.services.engine

    @property
    def llm(self) -> Any:
        return self.services.llm
