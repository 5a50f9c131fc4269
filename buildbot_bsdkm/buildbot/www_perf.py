"""The perf history page of the master's web UI: a ``wsgi_dashboards`` dashboard.

``buildbot-wsgi-dashboards`` mounts a WSGI app under ``/plugins/wsgi_dashboards/<name>/`` and the
UI shows its ``index.html`` as a page of its own (a "Perf history" entry in the side menu). The
page reads the ``bsdkm_perf_history`` table of the master's database (``perf/store.SqlStore``, what
``perf_history.record`` writes) and renders it with the core's history page (``report/history.py``,
the one the Action's nightly publishes too): per (fingerprint, target, variant) the HTML report's
trend chart, a table of the items and the list of the stored commits. Plain WSGI: the plugin needs
no framework and a page this size does not warrant one.

The plugin's resource sits outside Buildbot's REST layer, so nothing checks who asks: this app does
it itself, the way the REST API does. The session cookie is Buildbot's own (a JWT signed with the
master's session secret, read back with ``site.getSession``) and the question goes to the master's
``authz`` as a read of ``/builders``: with ``www: {anonymous: none}`` a visitor who is not logged in
gets 403, as from the REST API (``www_security.py``).
"""

from __future__ import annotations

import http.cookies
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from twisted.internet import reactor
from twisted.internet.threads import blockingCallFromThread

from ..report import history
from . import perf_history

NAME = "perf-history"
PLUGIN = "wsgi_dashboards"
WINDOW = history.WINDOW  # the same window the gate learns from (perf_history.provide)
SESSION_COOKIES = ("TWISTED_SESSION", "TWISTED_SECURE_SESSION")  # buildbot.www.auth.build_cookie_name
AUTHZ_ENDPOINT = ("builders",)  # what the page shows is builders' history: a read like GET /builders

StartResponse = Callable[..., Any]


def render(keys: Iterable[tuple[str, str, str, int]],
           window_of: Callable[[str, str, str], list[tuple[str, Any]]]) -> str:
    """The page: the core's renderer over this master's database."""
    return history.render(keys, window_of, window=WINDOW,
                          kept="kept in this master's database (<code>bsdkm_perf_history</code>)",
                          empty="base-branch builds (not PR builds) add their healthy runs.")


def _user_info(master: Any, environ: Mapping[str, Any]) -> dict[str, Any]:
    """Who is asking: the Buildbot session in the request's cookie, anonymous without a valid one."""
    cookies = http.cookies.SimpleCookie()
    try:
        cookies.load(str(environ.get("HTTP_COOKIE") or ""))
    except http.cookies.CookieError:
        return {"anonymous": True}
    for name, morsel in cookies.items():
        if name.startswith(SESSION_COOKIES):
            try:
                return dict(master.www.site.getSession(morsel.value).user_info)
            except KeyError:  # expired, or not signed by this master
                continue
    return {"anonymous": True}


def _allowed(master: Any, user_info: dict[str, Any]) -> bool:
    authz = getattr(master.www, "authz", None)
    if authz is None:
        return True
    from buildbot.www.authz import Forbidden

    try:
        blockingCallFromThread(reactor, authz.assertUserAllowed, AUTHZ_ENDPOINT, "get", {}, user_info)
    except Forbidden:
        return False
    return True


class PerfHistoryPage:
    """The WSGI app; ``buildbot_wsgi_dashboards`` sets ``buildbot_api`` (its ``master``) on it."""

    buildbot_api: Any = None

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> list[bytes]:
        path = environ.get("PATH_INFO") or "/"
        if path not in ("/", "/index.html"):
            return self._reply(start_response, "404 Not Found", f"no page {path}")
        master = getattr(self.buildbot_api, "master", None)
        if master is None:
            return self._reply(start_response, "503 Service Unavailable", "the master is not configured yet")
        if not _allowed(master, _user_info(master, environ)):
            return self._reply(start_response, "403 Forbidden", "you need to log in to see the perf history")
        db_url = perf_history.master_db_url(master)
        if not db_url:
            return self._reply(start_response, "503 Service Unavailable", "the master has no db_url")
        store = perf_history.store_for(db_url)
        page = render(store.series(), lambda fp, t, v: store.window(fp, t, v, WINDOW))
        return self._reply(start_response, "200 OK", page, "text/html")

    @staticmethod
    def _reply(start_response: StartResponse, status: str, text: str,
               kind: str = "text/plain") -> list[bytes]:
        body = text.encode("utf-8")
        start_response(status, [("Content-Type", f"{kind}; charset=utf-8"),
                                ("Content-Length", str(len(body))), ("Cache-Control", "no-store")])
        return [body]


def dashboard() -> dict[str, Any]:
    """One entry of ``www['plugins']['wsgi_dashboards']``."""
    return {"name": NAME, "caption": "Perf history", "app": PerfHistoryPage(), "order": 20,
            "icon": "area-chart"}


def apply_perf_dashboard(c: dict[str, Any]) -> None:
    """Add the perf history page to ``BuildmasterConfig`` ``c``'s web UI plugins."""
    c["www"].setdefault("plugins", {}).setdefault(PLUGIN, []).append(dashboard())
