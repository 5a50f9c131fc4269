"""The perf history page: per machine fingerprint, target and variant, the trend charts of the HTML
report over the stored base-branch runs, a table of the items and the list of the stored commits.

One renderer for both shells: the Buildbot master's perf history page (``buildbot/www_perf.py``,
from its database) and the static page the Action's nightly keeps next to its history
(``bsdkm-ci history page``, from a history directory). Each chart is the report's own
(``report.charts.trend_svg``: the series, the drift marker from ``perf/drift.py``).
"""

from __future__ import annotations

import html
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..perf.store import trend
from .charts import trend_svg

WINDOW = 30  # the window the perf gate learns from (buildbot/perf_history.provide, compare --history)

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

Key = tuple[str, str, str, int]  # (fingerprint, target, variant, stored runs)
WindowOf = Callable[[str, str, str], list[tuple[str, Any]]]  # its newest runs, (commit, run), oldest first


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _drift_text(d: Mapping[str, Any] | None) -> str:
    return f"{d['change'] * 100:+.1f}% from {d['commit']}" if d else ""


def _machine(window: list[tuple[str, Any]]) -> str:
    fp = (window[-1][1].metadata.get("fingerprint") or {}) if window else {}
    parts = [str(fp[k]) for k in ("cpu_model", "os", "kernel", "compiler") if fp.get(k)]
    return "; ".join(parts)


def _panel_median(values: list[float]) -> float:
    """The median the item's trend panel draws against (the upper one of an even count), so the
    table and the chart say the same."""
    return sorted(values)[len(values) // 2]


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
        rel = t["head"] / _panel_median(values) - 1.0
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


def render(keys: Iterable[Key], window_of: WindowOf, *, kept: str, empty: str, window: int = WINDOW) -> str:
    """The page's body: a summary row per (fingerprint, target, variant), then each one's chart and
    commits. ``kept`` says (as HTML) where the runs are kept, ``empty`` what adds them."""
    keys = list(keys)
    body = ['<div class="bsdkm-perf">', STYLE, "<h2>Performance history</h2>",
            f"<p>Healthy base-branch runs {kept}, per machine fingerprint, target and variant: the newest "
            f"{window} of each, the window the perf gate learns its limits from. Each panel: one item's best "
            "value per run relative to the series' median, the newest run highlighted, a dashed line where "
            "drift began.</p>"]
    if not keys:
        body.append(f"<p>No history stored yet: {empty}</p></div>")
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


def static_page(keys: Iterable[Key], window_of: WindowOf, *, title: str = "bsdkm-ci performance history",
                window: int = WINDOW) -> str:
    """The page as a document of its own, for a static site (the Action's ``gh-pages`` branch)."""
    body = render(keys, window_of, window=window, kept="kept in this site's <code>history/</code> directory "
                  "(<code>bsdkm-ci history add</code>)",
                  empty="the nightly workflow adds its healthy base-branch runs.")
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<title>{_e(title)}</title>\n</head>\n<body>\n{body}\n</body>\n</html>\n")


def history_link(url: str) -> str:
    """The Markdown line a report or PR comment links the history page with."""
    return f"Performance history of the base branch, with trend charts: [{url}]({url})"
