"""The report's SVG charts: speedups of accelerated over software, and each item's perf trend.

Drawn by hand as standalone SVG (no plotting library on a worker or in the Action): the HTML report
puts them after their sections' headings, and the master's perf history page draws its trends here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any
from xml.sax.saxutils import escape as xml_escape

from ..policy import Check, CheckKind, Verdict
from .verdict import PERF_HEADING


def speedup_svg(checks: Sequence[Check], *, width: int = 720, bar_height: int = 18) -> str:
    """Horizontal bar chart of speedup checks (log scale, minimum marked), as standalone SVG."""
    items = [c for c in checks if c.kind == CheckKind.SPEEDUP and c.value]
    label_w, pad, top = 300, 8, 24
    height = top + len(items) * (bar_height + pad) + pad
    ratios = [c.value or 1.0 for c in items] + [c.threshold or 1.0 for c in items]
    # log scale, so 1.5x and 30x fit on one chart; it starts below 1x when the accelerated side lost
    lo, hi = min(ratios + [1.0]) / 1.25, max(ratios + [2.0])
    plot_w = width - label_w - 70

    def x_of(ratio: float) -> float:
        return label_w + plot_w * (math.log(ratio / lo) / math.log(hi / lo))

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img" aria-label="speedup of accelerated over software">',
             '<style>text{font:12px sans-serif}</style>',
             f'<text x="{label_w}" y="14">speedup (log scale from {lo:.2g}x), | = required minimum</text>']
    for i, c in enumerate(items):
        y = top + i * (bar_height + pad)
        colour = "#2da44e" if c.passed else "#cf222e"
        label = xml_escape(f"{c.target}/{c.variant} {c.name}")
        end = x_of(c.value or 1.0)
        parts.append(f'<text x="{label_w - 6}" y="{y + bar_height - 5}" text-anchor="end">{label}</text>')
        parts.append(f'<rect x="{label_w}" y="{y}" width="{max(end - label_w, 1):.1f}" height="{bar_height}" '
                     f'fill="{colour}"><title>{xml_escape(c.message)}</title></rect>')
        parts.append(f'<text x="{end + 4:.1f}" y="{y + bar_height - 5}">{c.value:.2f}x</text>')
        if c.threshold:
            tx = x_of(c.threshold)
            parts.append(f'<line x1="{tx:.1f}" x2="{tx:.1f}" y1="{y - 2}" y2="{y + bar_height + 2}" '
                         'stroke="#000" stroke-width="2"/>')
    parts.append("</svg>")
    return "\n".join(parts)


_TREND_W, _TREND_H = 360, 90


def _trend_panel(name: str, t: Mapping[str, Any], x0: int, y0: int) -> list[str]:
    """One item: history (grey dots), this run (coloured by verdict), the drift's start (dashed line)."""
    values = [v for _, v in t["points"]] + [t["head"]]
    mid = sorted(values)[len(values) // 2]
    rel = [v / mid - 1.0 for v in values]
    span = max(0.02, max(abs(r) for r in rel))
    n = len(values)
    w, h, pad = _TREND_W - 20, _TREND_H - 34, 10

    def xy(i: int, r: float) -> tuple[float, float]:
        return x0 + pad + (w - pad) * i / max(1, n - 1), y0 + 22 + h / 2 - (h / 2) * r / span

    colour = {"regression": "#c0392b", "improvement": "#2471a3", "inconclusive": "#b9770e"}.get(
        t["verdict"], "#1e8449")
    out = [f'<rect x="{x0}" y="{y0}" width="{_TREND_W - 6}" height="{_TREND_H - 6}" fill="#fafafa" '
           'stroke="#ddd"/>',
           f'<text x="{x0 + 6}" y="{y0 + 14}" font-size="11">{xml_escape(name)}'
           f'{" (cycles)" if t.get("cycles") else ""}: {xml_escape(t["verdict"])}</text>']
    zx, zy = xy(0, 0.0)
    out.append(f'<line x1="{zx}" y1="{zy:.1f}" x2="{x0 + _TREND_W - 10}" y2="{zy:.1f}" stroke="#ccc"/>')
    d = t.get("drift")
    if d:
        dx, _ = xy(int(d["index"]), 0.0)
        out.append(f'<line class="drift" x1="{dx:.1f}" y1="{y0 + 18}" x2="{dx:.1f}" '
                   f'y2="{y0 + _TREND_H - 10}" stroke="#c0392b" stroke-dasharray="3,2"/>')
        out.append(f'<text x="{dx + 3:.1f}" y="{y0 + _TREND_H - 12}" font-size="9" fill="#c0392b">drift '
                   f'{d["change"] * 100:+.1f}% from {xml_escape(str(d["commit"]))}</text>')
    pts = " ".join(f"{xy(i, r)[0]:.1f},{xy(i, r)[1]:.1f}" for i, r in enumerate(rel[:-1]))
    out.append(f'<polyline points="{pts}" fill="none" stroke="#999" stroke-width="1"/>')
    for i, r in enumerate(rel[:-1]):
        px, py = xy(i, r)
        out.append(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="2" fill="#777"/>')
    hx, hy = xy(n - 1, rel[-1])
    out.append(f'<circle class="head" cx="{hx:.1f}" cy="{hy:.1f}" r="4" fill="{colour}"/>')
    out.append(f'<text x="{x0 + _TREND_W - 12}" y="{y0 + 14}" font-size="9" text-anchor="end">'
               f'{xml_escape(t.get("head_label", "this run"))} {rel[-1] * 100:+.1f}% vs median '
               f'(±{span * 100:.0f}%)</text>')
    return out


def perf_trend_svg(verdict: Verdict, heading: str) -> str:
    """Trend chart per item for the run a ``Performance:`` heading names: history, this run, drift."""
    label = heading[len(PERF_HEADING):].split(" ", 1)[0]
    run = next((r for r in verdict.perf if f"{r['target']}/{r['variant']}" == label), None)
    return trend_svg((run or {}).get("trend") or {})


def trend_svg(trend: Mapping[str, Mapping[str, Any]]) -> str:
    """The trend panels of one (target, variant), three a row; also the master's perf history page's."""
    if not trend:
        return ""
    cols = 3
    rows = (len(trend) + cols - 1) // cols
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="trend" width="{cols * _TREND_W}" '
             f'height="{rows * _TREND_H}" viewBox="0 0 {cols * _TREND_W} {rows * _TREND_H}" '
             'font-family="sans-serif">']
    for k, (name, t) in enumerate(trend.items()):
        parts += _trend_panel(name, t, (k % cols) * _TREND_W, (k // cols) * _TREND_H)
    parts.append("</svg>")
    return "\n".join(parts)
