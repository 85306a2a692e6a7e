"""Environment variables set for a while (a command's project, a library's offline switch): put
back as they were when that ends."""

from __future__ import annotations

import os
from collections.abc import Mapping

__all__ = ["restore_env"]


def restore_env(saved: Mapping[str, str | None]) -> None:
    """Put each variable back to its saved value; one that was unset (None) is unset again."""
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
