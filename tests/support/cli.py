"""Runs the real ``evalloop`` console script in a project directory, as a user would."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

EVALLOOP = shutil.which("evalloop") or str(Path(sys.executable).parent / "evalloop")


def cli(cwd: Path, *args: str, env: dict[str, str] | None = None,
        timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([EVALLOOP, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "NO_COLOR": "1", **(env or {})})
