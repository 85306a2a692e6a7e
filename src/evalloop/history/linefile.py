"""A file of whole lines (the run logs): all-or-nothing appends, a partial last line mended, and
lines found by their first bytes without holding them whole.

What a whole line is (a run-log entry) is the caller's: ``is_whole(raw) -> bool``.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import logging
import os
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

log = logging.getLogger("evalloop.runlog")
IsWhole = Callable[[bytes], bool]
CHUNK = 1 << 16  # bytes read at a time when only the lines' first bytes are wanted
HEAD = 200  # how many first bytes of each line :func:`spans` gives
_TEXT = re.compile(rb"\S")


class AppendFailed(OSError):
    """An append that did not complete (full disk, file size limit); it was rolled back."""

    def __init__(self, cause: OSError, written: int) -> None:
        super().__init__(cause.errno, cause.strerror or str(cause))
        self.written = written


def append(path: Path, parts: Iterable[bytes], is_whole: IsWhole, notices: list[str] | None = None) -> None:
    """Append whole lines (given as byte pieces), all or nothing: write, check every byte went
    out, fsync; on any failure truncate back to the previous length and raise :class:`AppendFailed`.

    Appenders on one host queue on an exclusive ``flock``. A partial last line left by an
    earlier crash is cut off first (with a notice), never buried mid-file; a complete last
    line that only lacks its newline gets one.
    """
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size, prefix = mend_tail(fd, path, os.fstat(fd).st_size, is_whole, notices)
        written = 0
        try:
            for piece in itertools.chain([prefix], parts):
                view = memoryview(piece)
                while view:
                    n = os.write(fd, view)
                    if n <= 0:
                        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                    written += n
                    view = view[n:]
            if os.fstat(fd).st_size != size + written:  # verified: what went out is what is there
                raise OSError(errno.EIO, f"the file is {os.fstat(fd).st_size} bytes, expected {size + written}")
            os.fsync(fd)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, size)
                os.fsync(fd)
            raise AppendFailed(exc, written) from None
    finally:
        os.close(fd)


def mend_tail(fd: int, path: Path, size: int, is_whole: IsWhole, notices: list[str] | None) -> tuple[int, bytes]:
    """Cut a partial last line off, or give a whole one its newline: the new size, and what to
    write before the next line (a newline, or nothing)."""
    if not size or os.pread(fd, 1, size - 1) == b"\n":
        return size, b""
    start = size
    while start > 0:  # find where the last line begins
        chunk_start = max(0, start - 65536)
        chunk = os.pread(fd, start - chunk_start, chunk_start)
        cut = chunk.rfind(b"\n")
        if cut >= 0:
            start = chunk_start + cut + 1
            break
        start = chunk_start
    if is_whole(os.pread(fd, size - start, start)):
        return size, b"\n"
    os.ftruncate(fd, start)
    message = (f"{path}: removed a partial last line ({size - start} bytes, left by an interrupted write) "
               "before appending")
    log.warning("%s", message)
    if notices is not None:
        notices.append(message)
    return start, b""


def mend(path: Path, is_whole: IsWhole) -> str | None:
    """Cut a partial last line off (``evalloop doctor --repair``); what was done, or None."""
    import fcntl

    notices: list[str] = []
    fd = os.open(path, os.O_RDWR | os.O_APPEND)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        _, data = mend_tail(fd, path, os.fstat(fd).st_size, is_whole, notices)
        if data:  # a whole last line that only lacked its newline
            os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    return notices[0] if notices else None


def spans(path: Path) -> Iterator[tuple[int, int, int, bool, bytes]]:
    """(line number, start, end, has newline, first bytes) of every non-blank line, read in
    64 KiB chunks: a 2 MB line (a 100,000-case run) is never held whole to learn its head."""
    with open(path, "rb") as f:
        number, start, base, head, filled = 1, 0, 0, b"", False
        while chunk := f.read(CHUNK):
            at = 0
            while True:
                cut = chunk.find(b"\n", at)
                stop = cut if cut >= 0 else len(chunk)
                if not filled and _TEXT.search(chunk, at, stop):  # a blank line is never an entry
                    filled = True
                if len(head) < HEAD:
                    head += chunk[at:min(stop, at + HEAD - len(head))]
                if cut < 0:
                    break
                if filled:
                    yield number, start, base + cut, True, head
                number, start, head, filled, at = number + 1, base + cut + 1, b"", False, cut + 1
            base += len(chunk)
        if filled:
            yield number, start, base, False, head


def read_span(path: Path, start: int, end: int) -> str:
    """The text of one line found by :func:`spans`."""
    with open(path, "rb") as f:
        f.seek(start)
        return f.read(end - start).decode("utf-8", errors="replace")
