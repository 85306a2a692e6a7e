"""Files that belong to someone else: run the real CLI as a user who may not open them.

Tests run as root here, and root reads every file whatever its mode. So as root the files are
given to ``nobody`` (mode 600) and the CLI runs as root *without* the capabilities that bypass
file permissions (``setpriv`` drops CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH and CAP_FOWNER): it
is then refused exactly as another user would be, while it can still read its own venv under
``/root``. As an ordinary user the files are made mode 000 instead (still refused).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from support.cli import EVALLOOP

NOBODY = 65534
AS_OTHER = ["setpriv", "--inh-caps=-all", "--bounding-set=-dac_override,-dac_read_search,-fowner", "--"]


def can_simulate() -> bool:
    return os.geteuid() != 0 or shutil.which("setpriv") is not None


def give_away(*paths: Path, mode: int = 0o600) -> None:
    """Make ``paths`` another user's (as root: nobody's, ``mode``; else mode 000)."""
    for path in paths:
        if os.geteuid() == 0:
            os.chown(path, NOBODY, NOBODY)
            path.chmod(mode)
        else:
            path.chmod(0)


def take_back(*paths: Path) -> None:
    for path in paths:
        if os.geteuid() == 0:
            os.chown(path, 0, 0)
        path.chmod(0o644)


def cli_as_other(root: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """The real ``evalloop`` in ``root``, refused by file permissions as another user would be."""
    prefix = AS_OTHER if os.geteuid() == 0 else []
    return subprocess.run([*prefix, EVALLOOP, *args, "-C", str(root)], capture_output=True, text=True,
                          timeout=120, input=stdin, env={**os.environ, "NO_COLOR": "1"})


def snapshot(folder: Path) -> dict[str, tuple[int, int, bytes]]:
    """Every file of ``folder``: owner, mode and bytes (to see that nothing changed). SQLite's
    shared-memory index (``-shm``) and an empty ``-wal`` (a reader may make both) hold no data."""
    out = {}
    for path in sorted(folder.iterdir()):
        info = path.stat()
        if path.name.endswith("-shm") or (path.name.endswith("-wal") and not info.st_size):
            continue
        out[path.name] = (info.st_uid, info.st_mode, path.read_bytes() if path.is_file() else b"")
    return out
