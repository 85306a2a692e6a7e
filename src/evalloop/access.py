"""Why a store's file cannot be opened here — permissions, ownership, a read-only mount — and the fix.

A SQLite store is usable only when this process may read (and, to write, also write) the file,
its ``-wal``/``-shm`` companions, and create files in its folder (SQLite makes the ``-wal`` and
``-shm`` files there). :func:`diagnose` tries exactly that, without creating or changing
anything, and says what is in the way in words a user can act on: who owns the file, its mode,
who evalloop runs as, and the ``chown``/``chmod`` (or "run as the owner") that mends it. Such a
file is *not* damaged: nothing about it may be moved or rebuilt (see ``evalloop doctor``).
"""

from __future__ import annotations

import errno
import os
import pwd
import stat
from dataclasses import dataclass
from pathlib import Path

COMPANIONS = ("", "-wal", "-shm")


@dataclass(frozen=True)
class AccessProblem:
    """What keeps this process from a store's file (``what``), and how to mend it (``fix``)."""

    path: Path
    what: str
    fix: str
    readable: bool  # the data can still be read (only writing is refused)


def user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _read_only_mount(folder: Path) -> bool:
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _try_open(path: Path, flags: int) -> OSError | None:
    try:
        os.close(os.open(path, flags))
    except OSError as exc:
        return exc
    return None


def diagnose(path: Path, *, write: bool = True) -> AccessProblem | None:
    """What keeps this process from opening the SQLite file ``path`` (to read, and with
    ``write`` also to write), or None when nothing does. A missing file is no problem if its
    folder lets it be made. Nothing is created or changed."""
    path = Path(path)
    folder = path.parent
    me = user_name(os.geteuid())
    files = [path.with_name(path.name + s) for s in COMPANIONS if path.with_name(path.name + s).exists()]
    for file in files:
        for flags, needed in ((os.O_RDONLY, "read"), (os.O_RDWR, "write")):
            if needed == "write" and not write:
                continue
            error = _try_open(file, flags)
            if error is None:
                continue
            readable = needed == "write" and _try_open(path, os.O_RDONLY) is None
            if error.errno == errno.EROFS or _read_only_mount(folder):
                return _read_only(path, readable=readable)
            if error.errno in (errno.EACCES, errno.EPERM):
                return _denied(path, file, files, needed, me, readable=readable)
            return AccessProblem(path, f"{file.name} cannot be opened to {needed} ({error.strerror})",
                                 "check the file and its folder", readable)
    made = all(path.with_name(path.name + s).exists() for s in COMPANIONS)  # WAL needs no new file then
    if write and not made and folder.exists() and not os.access(folder, os.W_OK | os.X_OK):
        readable = not files or _try_open(path, os.O_RDONLY) is None
        if _read_only_mount(folder):
            return _read_only(path, readable=readable)
        info = folder.stat()
        owner = user_name(info.st_uid)
        return AccessProblem(
            path, f"its folder {folder} is not writable by {me} (owned by {owner}, mode "
                  f"{stat.S_IMODE(info.st_mode):o}); SQLite makes its -wal and -shm files there",
            f"run evalloop as {owner}, or let {me} write the folder: `chmod u+w {folder}` as its owner"
            if info.st_uid == os.geteuid() else
            f"run evalloop as {owner} (`sudo -u {owner} evalloop …`), or `sudo chown {me} {folder}`",
            readable)
    return None


def _read_only(path: Path, *, readable: bool) -> AccessProblem:
    return AccessProblem(path, "the file is on a read-only file system",
                         "remount it read-write, or point evalloop at a copy in a writable place "
                         "(reading commands — history, show, report — still work)", readable)


def _denied(path: Path, file: Path, files: list[Path], needed: str, me: str, *, readable: bool) -> AccessProblem:
    info = file.stat()
    owner = user_name(info.st_uid)
    mode = f"{stat.S_IMODE(info.st_mode):o}"
    names = " ".join(str(f) for f in files)
    subject = "the file" if file == path else file.name
    if info.st_uid != os.geteuid():
        return AccessProblem(
            path, f"{me} may not {needed} {subject} (owned by {owner}, mode {mode})",
            f"run evalloop as {owner} (`sudo -u {owner} evalloop …`), or give the files to {me}: "
            f"`sudo chown {me} {names}`", readable)
    return AccessProblem(path, f"{subject} is not {'readable' if needed == 'read' else 'writable'} (mode {mode})",
                         f"`chmod u+rw {names}`", readable)


#: under this many free bytes a store's file system counts as full (SQLite needs a few pages
#: for its journal even to roll back)
FULL_BELOW = 256 * 1024


def out_of_space(path: Path) -> bool:
    """Whether the file system that holds ``path`` (or its nearest existing folder) is full."""
    here = path
    while not here.exists() and here != here.parent:
        here = here.parent
    try:
        info = os.statvfs(here)
    except OSError:
        return False
    return info.f_bavail * info.f_frsize < FULL_BELOW


def space_advice(path: Path | None) -> str:
    """How to mend a full disk: nothing is damaged; free space where the store lives."""
    where = f" on the file system of {path.parent}" if path is not None else ""
    return f"free disk space{where} and run again (the store is intact: no repair needed)"
