"""``evalloop view``: serve a local, read-only viewer of the history in a browser."""

from __future__ import annotations

from typing import Annotated

import typer

from evalloop.cli.app import ProjectOpt, app, err, friendly, settings_for


@app.command()
@friendly
def view(
    port: Annotated[int, typer.Option("--port", "-p", min=0, max=65535, help="The port to listen on.")] = 8765,
    host: Annotated[str, typer.Option(
        "--host", help="The interface to listen on. The default serves this machine only; another "
                       "(0.0.0.0: every interface) shows the history to whoever reaches it.")] = "127.0.0.1",
    project: ProjectOpt = None,
) -> None:
    """Serve a read-only viewer of the history: suites, runs and their cases, any two runs compared
    case by case, incidents and lessons. Nothing is written; Ctrl-C stops it.

    Example: [bold]evalloop view[/bold]  (then open http://127.0.0.1:8765/)
    """
    from evalloop.view.app import LOOPBACK_HOSTS
    from evalloop.view.serve import make_server

    def said(url: str) -> None:
        err().print(f"evalloop view: {url} (read-only; Ctrl-C stops it)", markup=False, highlight=False)
        if host not in LOOPBACK_HOSTS:
            err().print(f"warning: listening on {host}: anyone who can reach it sees the history", markup=False,
                        highlight=False)

    server = make_server(settings_for(project), host=host, port=port, on_ready=said)
    try:
        server.run()
    except KeyboardInterrupt:  # Ctrl-C is how a viewer stops (uvicorn re-raises it once it has)
        err().print("evalloop view: stopped", markup=False, highlight=False)
