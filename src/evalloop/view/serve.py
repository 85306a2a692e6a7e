"""Serving the viewer: uvicorn on 127.0.0.1 unless ``--host`` says otherwise, the history checked
before the first request (no history: one line, nothing created)."""

from __future__ import annotations

import contextlib
import threading
from typing import TYPE_CHECKING, Any

from evalloop.config import Settings
from evalloop.errors import ConfigError, EvalloopError
from evalloop.history.readonly import sqlite_path
from evalloop.redact import redact_url

if TYPE_CHECKING:
    import uvicorn

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


def make_server(settings: Settings, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT) -> Any:
    """A uvicorn server of the viewer (not started): ``server.run()`` serves until interrupted or
    ``server.should_exit`` is set; ``server.ready`` (an event) is set once it listens."""
    try:
        import uvicorn
    except ImportError:  # pragma: no cover - a dependency of evalloop
        raise ConfigError("the viewer needs uvicorn and starlette", hint="pip install evalloop") from None
    from evalloop.view.app import create_app

    check_history(settings)
    app = create_app(settings, host=host)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False,
                            server_header=False, proxy_headers=False, lifespan="off")

    class ViewerServer(uvicorn.Server):
        """uvicorn's server, saying when it listens (``ready``)."""

        def __init__(self, config: uvicorn.Config) -> None:
            super().__init__(config)
            self.ready = threading.Event()

        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            self.ready.set()
            threading.Thread(target=_warm, args=(app.state.source,), name="evalloop-view-warm", daemon=True).start()

    return ViewerServer(config)


def _warm(source: Any) -> None:
    """Read the latest runs ahead of the first request; a failure here shows on the page instead."""
    with contextlib.suppress(Exception):  # an optimisation: the page reads what it needs itself
        source.warm()


def bound_port(server: uvicorn.Server) -> int | None:
    """The port a started server listens on (port 0 asks the system for a free one)."""
    for listener in getattr(server, "servers", []) or []:
        for sock in listener.sockets:
            return int(sock.getsockname()[1])
    return None
