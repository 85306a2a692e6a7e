"""Package names imported on first use: a package's ``__getattr__``/``__dir__`` from a table of
name → module, so importing the package loads none of the modules behind it."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, str],
                 namespace: dict[str, Any]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: a name in ``exports`` is imported from its
    module when first asked for and kept in ``namespace`` (the package's globals)."""

    def getattr_(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module '{package}' has no attribute '{name}'")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def dir_() -> list[str]:
        return sorted([*namespace, *exports])

    return getattr_, dir_
