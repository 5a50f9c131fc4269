"""Offload vs software inside one run: the paths of the AF_ALG benchmark.

An lkcapi run measures one algorithm along several *paths* in one boot (``parsers/afalg_bench.py``:
``afalg:<path>:<ALG>@<bytes>``). A ``crossovers`` rule with ``paths: true`` compares two
paths of the same run instead of two variants::

    crossovers:
      - pattern: "afalg:*"
        paths: true
        accelerated: lkcapi        # AF_ALG bound to wolfCrypt's registered driver
        software: user             # wolfCrypt in user space (or: kernel, the kernel's own driver)
        max_block: 16384           # optional: offload must win from this size up
        max_slower_pct: 10         # optional: never more than 10 % slower at any block size

Both limits, when given, must hold. Without them the check states the crossover (or
"never") and passes: under QEMU TCG the speeds are the emulator's, so the default policy
gates only the structure (every path measured, the registered driver really used), not
the speed. Besides the crossover checks, every rule with ``paths: true`` adds one
``offload`` check per run and algorithm: AF_ALG on the ``lkcapi`` path was bound to a
driver of module ``libwolfssl`` whose priority /proc/crypto lists, and the generic name
(``name`` path) resolved to it too when that path ran.

The gate of these rules is ``policy/paths.py``; this module is the report side: a Markdown table
of throughput by block size per path, and an SVG chart per algorithm (throughput against block
size, log-log, crossover marked).
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from typing import Any

from ..model import RunResult
from ..policy import Check, CheckKind, Verdict
from ..policy.paths import path_series
from .blocks import Block, Row, Table

KIND_OFFLOAD = CheckKind.OFFLOAD
OFFLOAD_HEADING = "Offload vs software"  # report/html_page.py puts the charts after this heading
PATH_LABELS = {"lkcapi": "AF_ALG → wolfCrypt driver", "kernel": "AF_ALG → kernel's own driver",
               "name": "AF_ALG by generic name", "user": "wolfCrypt in user space"}
PATH_COLOURS = {"lkcapi": "#0969da", "kernel": "#cf222e", "user": "#2da44e", "name": "#8250df"}


# ---------------------------------------------------------------------------
# Report


def _path_checks(verdict: Verdict) -> list[Check]:
    return [c for c in verdict.of_kind(CheckKind.CROSSOVER) if c.detail.get("paths")]


def _fmt_rate(bps: float) -> str:
    return f"{bps / 1e6:.3g}"


def offload_blocks(runs: Sequence[RunResult], verdict: Verdict) -> list[Any]:
    """Markdown/HTML blocks: throughput (MB/s) by block size for every path, per run and algorithm."""
    blocks: list[Any] = []
    for run in runs:
        series = path_series(run)
        if not series:
            continue
        if not blocks:
            blocks.append(Block("h3", f"{OFFLOAD_HEADING} (MB/s by block size and path)"))
        crossings: dict[str, list[Check]] = {}
        for c in _path_checks(verdict):
            if c.variant == run.variant and c.target == run.target:
                crossings.setdefault(c.name.split(" ", 1)[0], []).append(c)
        for family, paths in sorted(series.items()):
            sizes = sorted({s for p in paths.values() for s in p})
            table = Table(["path", *[str(s) for s in sizes]])
            for path in sorted(paths, key=lambda p: list(PATH_LABELS).index(p) if p in PATH_LABELS else 99):
                cells = [_fmt_rate(paths[path][s]) if s in paths[path] else "–" for s in sizes]
                table.rows.append(Row([f"{path} ({PATH_LABELS.get(path, path)})", *cells]))
            verdict_text = ""
            for c in crossings.get(family, []):
                where = c.detail.get("crossover")
                verdict_text += (f"; {c.detail.get('accelerated')} beats {c.detail.get('software')} from "
                                 f"{where} bytes" if where != "never" else
                                 f"; {c.detail.get('accelerated')} never beats {c.detail.get('software')}")
            blocks.append(Block("p", f"{run.target}/{run.variant} {family}{verdict_text}"))
            blocks.append(Block("table", table=table))
    return blocks


def offload_svg(runs: Sequence[RunResult], verdict: Verdict, *, width: int = 560, height: int = 300) -> str:
    """One SVG chart per (run, algorithm): MB/s against block size (log-log), crossover marked."""
    charts = []
    checks = _path_checks(verdict)
    for run in runs:
        for family, paths in sorted(path_series(run).items()):
            marks = [c for c in checks if c.variant == run.variant and c.target == run.target
                     and c.name.split(" ", 1)[0] == family]
            charts.append(_chart(f"{run.target}/{run.variant} {family}", paths, marks, width, height))
    return "\n".join(charts)


def _chart(title: str, paths: dict[str, dict[int, float]], marks: list[Check], width: int,
           height: int) -> str:
    e = html.escape
    left, right, top, bottom = 64, 190, 28, 40
    sizes = sorted({s for p in paths.values() for s in p})
    rates = [v for p in paths.values() for v in p.values() if v > 0]
    if not sizes or not rates:
        return ""
    xlo, xhi = math.log2(sizes[0]), math.log2(sizes[-1]) if sizes[-1] > sizes[0] else math.log2(sizes[0]) + 1
    ylo, yhi = math.log10(min(rates)) - 0.1, math.log10(max(rates)) + 0.1
    pw, ph = width - left - right, height - top - bottom

    def x(size: float) -> float:
        return left + pw * (math.log2(size) - xlo) / (xhi - xlo)

    def y(rate: float) -> float:
        return top + ph * (1 - (math.log10(rate) - ylo) / (yhi - ylo))

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img" aria-label="{e(title)}: throughput by block size">',
           "<style>text{font:11px sans-serif}</style>",
           f'<text x="{left}" y="16" style="font-weight:bold">{e(title)}</text>',
           f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#888"/>']
    for s in sizes:
        out.append(f'<line x1="{x(s):.1f}" x2="{x(s):.1f}" y1="{top + ph}" y2="{top + ph + 4}" '
                   'stroke="#888"/>')
        label = f"{s // 1024}K" if s >= 1024 else str(s)
        out.append(f'<text x="{x(s):.1f}" y="{top + ph + 16}" text-anchor="middle">{label}</text>')
    out.append(f'<text x="{left + pw / 2:.0f}" y="{height - 6}" text-anchor="middle">'
               "block size (bytes)</text>")
    for p10 in range(math.floor(ylo), math.ceil(yhi) + 1):
        if ylo <= p10 <= yhi:
            gy = y(10 ** p10)
            out.append(f'<line x1="{left - 4}" x2="{left + pw}" y1="{gy:.1f}" y2="{gy:.1f}" stroke="#eee"/>')
            out.append(f'<text x="{left - 6}" y="{y(10 ** p10) + 4:.1f}" text-anchor="end">'
                       f'{_fmt_rate(10 ** p10)}</text>')
    out.append(f'<text x="12" y="{top + ph / 2:.0f}" transform="rotate(-90 12 {top + ph / 2:.0f})" '
               'text-anchor="middle">MB/s (log)</text>')
    for i, (path, pts) in enumerate(sorted(paths.items())):
        colour = PATH_COLOURS.get(path, "#57606a")
        coords = " ".join(f"{x(s):.1f},{y(v):.1f}" for s, v in sorted(pts.items()) if v > 0)
        out.append(f'<polyline points="{coords}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for s, v in sorted(pts.items()):
            out.append(f'<circle cx="{x(s):.1f}" cy="{y(v):.1f}" r="2.5" fill="{colour}">'
                       f"<title>{e(path)} {s} B: {_fmt_rate(v)} MB/s</title></circle>")
        ly = top + 12 + i * 16
        out.append(f'<line x1="{left + pw + 10}" x2="{left + pw + 26}" y1="{ly - 4}" y2="{ly - 4}" '
                   f'stroke="{colour}" stroke-width="2"/>')
        out.append(f'<text x="{left + pw + 30}" y="{ly}">{e(path)}</text>')
    for j, c in enumerate(marks):
        point = c.detail.get("crossover")
        text = f"{c.detail.get('accelerated')} vs {c.detail.get('software')}: "
        ly = top + 12 + (len(paths) + j) * 16 + 8
        if point == "never":
            out.append(f'<text x="{left + pw + 10}" y="{ly}">{e(text)}never</text>')
            continue
        # dashed in the colour of the path it is compared with; the legend says which line is which
        px, colour = x(int(point)), PATH_COLOURS.get(str(c.detail.get("software")), "#000")
        out.append(f'<line x1="{px:.1f}" x2="{px:.1f}" y1="{top}" y2="{top + ph}" stroke="{colour}" '
                   f'stroke-dasharray="{4 + 2 * j} 3" stroke-width="1.5">'
                   f"<title>{e(c.message)}</title></line>")
        out.append(f'<line x1="{left + pw + 10}" x2="{left + pw + 26}" y1="{ly - 4}" y2="{ly - 4}" '
                   f'stroke="{colour}" stroke-dasharray="{4 + 2 * j} 3"/>')
        out.append(f'<text x="{left + pw + 30}" y="{ly}">{e(text)}{point} B</text>')
    out.append("</svg>")
    return "\n".join(out)
