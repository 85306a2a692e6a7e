"""The viewer's web application (Starlette): one route per page, every page rendered from the
templates the static report uses (:mod:`evalloop.report.templating`), every read read-only.

Nothing a page shows can run in the browser: values are escaped (autoescape), and every response
forbids scripts, frames and fetches (``Content-Security-Policy``). Requests must name the host
the viewer listens on (a DNS-rebinding page cannot read it), and only GET and HEAD are served.
"""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from evalloop.config import Settings
from evalloop.errors import EvalloopError
from evalloop.report.html import verdict_class
from evalloop.report.templating import environment
from evalloop.view import urls
from evalloop.view.comparison import compare_page
from evalloop.view.incidents import find_incident, suite_incidents
from evalloop.view.overview import home_rows, suite_page
from evalloop.view.runpage import RunFilter, page_numbers, run_page, shown
from evalloop.view.source import Source

#: what a page may load: its own inline style and nothing else (no script, frame, font or fetch)
CSP = ("default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'; "
       "base-uri 'none'; frame-ancestors 'none'")
HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
           "X-Frame-Options": "DENY", "Cache-Control": "no-store"}
#: hosts that serve this machine only (any other is what ``--host`` asked for)
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


def page(template: str, title: str, status: int = 200, **context: Any) -> HTMLResponse:
    """A page rendered from ``templates/view/<template>.html.j2``."""
    body = environment().get_template(f"view/{template}.html.j2").render(
        title=title, urls=urls, vclass=verdict_class, shown=shown, **context)
    return HTMLResponse(body, status_code=status, headers=HEADERS)


def create_app(settings: Settings, *, host: str = "127.0.0.1") -> Starlette:
    """The viewer of ``settings``' project, for a server listening on ``host``."""
    source = Source(settings)

    def home(request: Request) -> Response:
        return page("home", "evalloop: suites", rows=home_rows(source), project=str(settings.project_dir))

    def suite(request: Request) -> Response:
        name = request.path_params["name"]
        found = suite_page(source, name)
        if found is None:
            raise HTTPException(404, f"no runs of suite '{name}'")
        return page("suite", f"{name} · evalloop", suite=found, name=name)

    def run(request: Request) -> Response:
        ref = request.path_params["run_id"]
        found = source.run(ref)
        if found is None:
            raise HTTPException(404, f"no run '{ref}'")
        if found.id != ref:  # a prefix: the page's stable URL names the whole id
            return RedirectResponse(urls.run(found.id, **dict(request.query_params)), status_code=307)
        chosen = RunFilter.from_query(request.query_params)
        data = run_page(source, found, chosen)
        return page("run", f"run {found.id} · {found.suite} · evalloop", page_=data,
                    numbers=page_numbers(data.filter.page, data.pages),
                    page_link=lambda n: urls.run(found.id, **data.filter.query(page=n)))

    def compare(request: Request) -> Response:
        a, b = source.run(request.path_params["a"]), source.run(request.path_params["b"])
        for ref, found in ((request.path_params["a"], a), (request.path_params["b"], b)):
            if found is None:
                raise HTTPException(404, f"no run '{ref}'")
        assert a is not None and b is not None
        if (a.id, b.id) != (request.path_params["a"], request.path_params["b"]):
            return RedirectResponse(urls.compare(a.id, b.id, **dict(request.query_params)), status_code=307)
        try:
            number = int(request.query_params.get("page", "1"))
        except ValueError:
            number = 1
        changed = request.query_params.get("changed", "") in ("1", "on", "yes")
        data = compare_page(source, a, b, page=number, changed_only=changed)
        return page("compare", f"{a.id} → {b.id} · evalloop", cmp=data,
                    numbers=page_numbers(data.page, data.pages),
                    page_link=lambda n: urls.compare(a.id, b.id, changed="1" if changed else "", page=n))

    def incidents(request: Request) -> Response:
        every = {name: suite_incidents(source, name) for name in source.store.suites()}
        return page("incidents", "incidents and lessons · evalloop", every=every)

    def incident(request: Request) -> Response:
        memory_id = request.path_params["memory_id"]
        found = find_incident(source, memory_id)
        if found is None:
            raise HTTPException(404, f"no incident '{memory_id}'")
        return page("incident", f"incident {found.id} · evalloop", item=found)

    async def not_found(request: Request, exc: Exception) -> Response:
        status = getattr(exc, "status_code", 404)
        detail = getattr(exc, "detail", "") or "not found"
        return page("error", f"{status} · evalloop", status=status, code=status, message=str(detail))

    async def failed(request: Request, exc: Exception) -> Response:
        message = exc.one_line() if isinstance(exc, EvalloopError) else "the viewer failed to read this page"
        return page("error", "error · evalloop", status=500, code=500, message=message)

    routes = [Route("/", home, methods=["GET", "HEAD"]),
              Route("/suites/{name:path}", suite, methods=["GET", "HEAD"]),
              Route("/runs/{run_id}", run, methods=["GET", "HEAD"]),
              Route("/compare/{a}/{b}", compare, methods=["GET", "HEAD"]),
              Route("/incidents", incidents, methods=["GET", "HEAD"]),
              Route("/incidents/{memory_id}", incident, methods=["GET", "HEAD"])]
    allowed = ["*"] if host not in LOOPBACK_HOSTS else ["127.0.0.1", "localhost", "[::1]"]
    app = Starlette(routes=routes, middleware=[Middleware(TrustedHostMiddleware, allowed_hosts=allowed)],
                    exception_handlers={HTTPException: not_found, EvalloopError: failed, Exception: failed})
    app.state.source = source
    return app
