"""Serving the viewer: uvicorn on 127.0.0.1 unless ``--host`` says otherwise, the history checked
before the first request (no history: one line, nothing created)."""

from __future__ import annotations

import contextlib
import gc
import socket
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from evalloop.config import Settings
from evalloop.errors import ConfigError, EvalloopError
from evalloop.history.models import RunStatus
from evalloop.history.readonly import sqlite_path
from evalloop.redact import redact_url

if TYPE_CHECKING:
    import uvicorn

    from evalloop.view.source import Source

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765


def check_history(settings: Settings) -> None:
    """Raise the one line of a reading command when there is no history to show: no file, no
    tables, or no run in them (nothing is created)."""
    from sqlalchemy import inspect

    from evalloop.history.store import HistoryStore

    url = settings.database_url
    path = sqlite_path(url)
    empty = EvalloopError("no runs yet", where=redact_url(url),
                          hint="run `evalloop run --suite NAME` (or `evalloop run --all`) first, then `evalloop view`")
    if path is not None and not path.is_file():
        raise empty
    store = HistoryStore(url, readonly=True)
    with store.engine.connect() as conn:
        if not inspect(conn).has_table("runs"):
            raise empty
    if not store.count_runs():
        raise empty


def make_server(settings: Settings, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
                on_ready: Callable[[str], None] | None = None) -> Any:
    """A uvicorn server of the viewer, its socket already listening (a port in use is one line
    here, not a log record later): ``server.run()`` serves until interrupted or
    ``server.should_exit`` is set; ``server.ready`` (an event) is set, and ``on_ready`` called
    with the viewer's URL (the port the system chose for port 0), once it serves."""
    try:
        import uvicorn
    except ImportError:  # pragma: no cover - a dependency of evalloop
        raise ConfigError("the viewer needs uvicorn and starlette", hint="pip install evalloop") from None
    from evalloop.view.app import create_app

    check_history(settings)
    app = create_app(settings, host=host)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False,
                            server_header=False, proxy_headers=False, lifespan="off")
    sock = _listen(host, port)

    class ViewerServer(uvicorn.Server):
        """uvicorn's server on the viewer's socket, saying when it serves (``ready``)."""

        def __init__(self, config: uvicorn.Config) -> None:
            super().__init__(config)
            self.ready = threading.Event()

        def run(self, sockets: Any = None) -> None:
            gc.freeze()  # the modules and the app live as long as the server (see _warm)
            try:
                super().run(sockets=[sock])
            finally:
                sock.close()
                gc.unfreeze()

        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            self.ready.set()
            if on_ready is not None:
                on_ready(url_of(host, int(sock.getsockname()[1])))
            threading.Thread(target=_warm, args=(app.state.source,), name="evalloop-view-warm", daemon=True).start()

    return ViewerServer(config)


def url_of(host: str, port: int) -> str:
    """The viewer's base URL for a browser (an IPv6 address in brackets)."""
    return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"


def _listen(host: str, port: int) -> socket.socket:
    """A socket listening on ``host``:``port``, or the one line saying why it cannot."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except (OSError, OverflowError) as exc:
        sock.close()
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(f"cannot listen on {url_of(host, port)}: {reason}", where="evalloop view",
                          hint="choose another --port (0: any free one), or a --host of this machine") from None
    sock.set_inheritable(True)
    return sock


def read_ahead(source: Source) -> None:
    """Read ahead of the first request, suite by suite: the latest finished run's cases, that
    run compared with the run before it (the link a failing run's page leads to), and the suite's
    page; its pages are then served from what the source keeps, and a request for what is being
    read waits for it instead of reading it again."""
    from evalloop.view.comparison import compare_page
    from evalloop.view.overview import suite_page

    finished = [s.value for s in RunStatus if s is not RunStatus.RUNNING]
    for name in source.store.suites():
        latest = source.store.runs(name, limit=1, statuses=finished)
        if latest:
            source.facts(latest[0])
        before = source.previous(latest[0]) if latest else None
        found = source.store.get_run(before) if before else None
        if latest and found is not None:
            compare_page(source, found, latest[0])
        suite_page(source, name)


def _warm(source: Source) -> None:
    """:func:`read_ahead` on its thread; a failure here shows on the page that needs it instead.

    What the server holds for its whole life (the modules, the app, then what this reading keeps)
    is frozen out of the garbage collector's full passes (``gc.freeze``): a 10k-case run's facts
    are ~50k new objects, enough to start a full pass, which otherwise walks every object the
    process holds — about half the time of reading a run's facts, measured."""
    with contextlib.suppress(Exception):  # an optimisation: each page reads what it needs itself
        read_ahead(source)
    gc.freeze()


def bound_port(server: uvicorn.Server) -> int | None:
    """The port a started server listens on (port 0 asks the system for a free one)."""
    for listener in getattr(server, "servers", []) or []:
        for sock in listener.sockets:
            return int(sock.getsockname()[1])
    return None
