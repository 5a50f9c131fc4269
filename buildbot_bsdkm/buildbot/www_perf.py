"""The perf history page of the master's web UI: a ``wsgi_dashboards`` dashboard.

``buildbot-wsgi-dashboards`` mounts a WSGI app under ``/plugins/wsgi_dashboards/<name>/`` and the
UI shows its ``index.html`` as a page of its own (a "Perf history" entry in the side menu). The
page reads the ``bsdkm_perf_history`` table of the master's database (``perf/store.SqlStore``, what
``perf_history.record`` writes) and, per (fingerprint, target, variant), draws the HTML report's
trend chart (``report.trend_svg``: the history series, the drift marker from ``perf/drift.py``),
a table of the items and the list of the stored commits. Plain WSGI: the plugin needs no framework
and a page this size does not warrant one.

The plugin's resource sits outside Buildbot's REST layer, so nothing checks who asks: this app does
it itself, the way the REST API does. The session cookie is Buildbot's own (a JWT signed with the
master's session secret, read back with ``site.getSession``) and the question goes to the master's
``authz`` as a read of ``/builders``: with ``www: {anonymous: none}`` a visitor who is not logged in
gets 403, as from the REST API (``www_security.py``).
"""

from __future__ import annotations

import html
import http.cookies
import statistics
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from twisted.internet import reactor
from twisted.internet.threads import blockingCallFromThread

from ..perf.store import trend
from ..report.verdict import trend_svg
from . import perf_history

NAME = "perf-history"
PLUGIN = "wsgi_dashboards"
WINDOW = 30  # the same window the gate learns from (perf_history.provide)
SESSION_COOKIES = ("TWISTED_SESSION", "TWISTED_SECURE_SESSION")  # buildbot.www.auth.build_cookie_name
AUTHZ_ENDPOINT = ("builders",)  # what the page shows is builders' history: a read like GET /builders

StartResponse = Callable[..., Any]

STYLE = """<style>
.bsdkm-perf { font-family: sans-serif; padding: 0 1em 2em; }
.bsdkm-perf table { border-collapse: collapse; margin: .4em 0 1em; }
.bsdkm-perf th, .bsdkm-perf td { border: 1px solid #ccc; padding: .15em .5em; text-align: left; }
.bsdkm-perf td.num { text-align: right; }
.bsdkm-perf .drift { color: #c0392b; }
.bsdkm-perf .machine { color: #555; font-size: 90%; }
.bsdkm-perf code { font-size: 90%; }
.bsdkm-perf svg.trend { max-width: 100%; height: auto; }
</style>"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _drift_text(d: Mapping[str, Any] | None) -> str:
    return f"{d['change'] * 100:+.1f}% from {d['commit']}" if d else ""


def _machine(window: list[tuple[str, Any]]) -> str:
    fp = (window[-1][1].metadata.get("fingerprint") or {}) if window else {}
    parts = [str(fp[k]) for k in ("cpu_model", "os", "kernel", "compiler") if fp.get(k)]
    return "; ".join(parts)


def _section(fp: str, target: str, variant: str, count: int, window: list[tuple[str, Any]]) -> list[str]:
    series = trend(window)
    anchor = _e(f"{target}-{variant}-{fp}")
    out = [f'<h3 id="{anchor}">{_e(target)}/{_e(variant)} <small>machine {_e(fp)}</small></h3>']
    machine = _machine(window)
    if machine:
        out.append(f'<p class="machine">{_e(machine)}</p>')
    out.append(f"<p>{count} stored run(s); the newest {len(window)} shown, oldest first.</p>")
    chart = trend_svg(series)
    out.append(chart or "<p>Fewer than two runs per item: no trend yet.</p>")
    out.append('<table class="items"><tr><th>item</th><th>runs</th><th>newest vs median</th>'
               "<th>drift</th></tr>")
    for name, t in series.items():
        values = [v for _, v in t["points"]] + [t["head"]]
        rel = t["head"] / statistics.median(values) - 1.0
        out.append(f'<tr class="item"><td>{_e(name)}</td><td class="num">{len(values)}</td>'
                   f'<td class="num">{rel * 100:+.1f}%</td>'
                   f'<td class="drift">{_e(_drift_text(t["drift"]))}</td></tr>')
    out.append("</table>")
    begins: dict[int, list[str]] = {}
    for name, t in series.items():
        if t["drift"]:
            begins.setdefault(int(t["drift"]["index"]), []).append(f"{name} {_drift_text(t['drift'])}")
    out.append('<table class="commits"><tr><th>#</th><th>commit</th><th>drift begins here</th></tr>')
    for i, (commit, _) in enumerate(window):
        mark = "; ".join(begins.get(i, []))
        out.append(f'<tr class="commit"><td class="num">{i + 1}</td><td><code>{_e(commit)}</code></td>'
                   f'<td class="drift">{_e(mark)}</td></tr>')
    out.append("</table>")
    return out


def render(keys: Iterable[tuple[str, str, str, int]],
           window_of: Callable[[str, str, str], list[tuple[str, Any]]]) -> str:
    """The page: a summary row per (fingerprint, target, variant), then each one's chart and commits."""
    keys = list(keys)
    body = ['<div class="bsdkm-perf">', STYLE, "<h2>Performance history</h2>",
            "<p>Healthy base-branch runs kept in this master's database (<code>bsdkm_perf_history</code>), "
            f"per machine fingerprint, target and variant: the newest {WINDOW} of each, the window the "
            "perf gate learns its limits from. Each panel: one item's best value per run relative to "
            "the series' median, the newest run highlighted, a dashed line where drift began.</p>"]
    if not keys:
        body.append("<p>No history stored yet: base-branch builds (not PR builds) add their healthy runs."
                    "</p></div>")
        return "\n".join(body)
    windows = {(fp, t, v): window_of(fp, t, v) for fp, t, v, _ in keys}
    body.append('<table class="keys"><tr><th>target/variant</th><th>machine</th><th>runs</th>'
                "<th>newest commit</th><th>drift</th></tr>")
    for fp, t, v, n in keys:
        w = windows[(fp, t, v)]
        drifts = [f"{name} {_drift_text(s['drift'])}" for name, s in trend(w).items() if s["drift"]]
        body.append(f'<tr><td><a href="#{_e(f"{t}-{v}-{fp}")}">{_e(t)}/{_e(v)}</a></td><td><code>{_e(fp)}'
                    f'</code></td><td class="num">{n}</td><td><code>{_e(w[-1][0] if w else "")}</code></td>'
                    f'<td class="drift">{_e("; ".join(drifts))}</td></tr>')
    body.append("</table>")
    for fp, t, v, n in keys:
        body += _section(fp, t, v, n, windows[(fp, t, v)])
    body.append("</div>")
    return "\n".join(body)


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
