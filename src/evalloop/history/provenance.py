"""Where a run comes from: its sortable id and the project's code version (git commit)."""

from __future__ import annotations

import secrets
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from evalloop.history.models import utcnow

if TYPE_CHECKING:
    from evalloop.environ import Environment


def new_run_id(at: datetime | None = None) -> str:
    """A sortable run id: UTC time to the millisecond plus 6 random hex digits."""
    at = at or utcnow()
    return at.strftime("%Y%m%dT%H%M%S") + f"{at.microsecond // 1000:03d}-" + secrets.token_hex(3)


def code_version(project_dir: Path, env: Environment | None = None) -> str | None:
    """``EVALLOOP_CODE_VERSION`` (``env``: the settings' environment; default: the process's),
    else the project's git commit (with ``-dirty`` when the tree has changes), if any."""
    import subprocess

    from evalloop.environ import environment

    given = (env or environment()).code_version
    if given:
        return given
    try:
        sha = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=project_dir,
                             capture_output=True, text=True, timeout=5)
        if sha.returncode != 0:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=project_dir, capture_output=True, text=True, timeout=5)
        return sha.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None
