"""Offload vs software inside one run (issue 15): the paths of the AF_ALG benchmark.

An lkcapi run measures one algorithm along several *paths* in one boot (``parsers/afalg.py``:
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

The report side: a Markdown table of throughput by block size per path, and an SVG chart
per algorithm (throughput against block size, log-log, crossover marked).
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .model import RunResult

if TYPE_CHECKING:
    from .policy import Check, CrossoverRule, Verdict

KIND_OFFLOAD = "offload"
OFFLOAD_HEADING = "Offload vs software"  # report.py puts the charts after this heading (HTML)
WOLFCRYPT_MODULE = "libwolfssl"
PATH_LABELS = {"lkcapi": "AF_ALG → wolfCrypt driver", "kernel": "AF_ALG → kernel's own driver",
               "name": "AF_ALG by generic name", "user": "wolfCrypt in user space"}
PATH_COLOURS = {"lkcapi": "#0969da", "kernel": "#cf222e", "user": "#2da44e", "name": "#8250df"}
_NAME = re.compile(r"(?P<prefix>[^:@]+):(?P<path>[^:@]+):(?P<alg>[^@]+)@(?P<size>\d+)")
_KERNEL_ALG = {"AES-128-GCM": "gcm(aes)", "AES-128-CBC": "cbc(aes)", "SHA-256": "sha256",
               "HMAC-SHA256": "hmac(sha256)"}


def path_series(run: RunResult, pattern: str = "*") -> dict[str, dict[str, dict[int, float]]]:
    """family (``afalg:AES-128-GCM``) -> path -> {block bytes: bytes/s} of one run's path items."""
    from .policy import matches

    out: dict[str, dict[str, dict[int, float]]] = {}
    for log in run.logs:
        for b in log.benchmarks:
            m = _NAME.fullmatch(b.name)
            if m is None or b.failed or b.per_second <= 0 or not matches(b.name, pattern):
                continue
            family = f"{m['prefix']}:{m['alg']}"
            out.setdefault(family, {}).setdefault(m["path"], {})[int(m["size"])] = b.per_second
    return out


def _bound(run: RunResult) -> tuple[dict[str, Any], dict[str, Any]]:
    bound: dict[str, Any] = {}
    proc: dict[str, Any] = {}
    for log in run.logs:
        bound.update(log.metadata.get("afalg_bound") or {})
        proc.update(log.metadata.get("afalg_proc") or {})
    return bound, proc


def evaluate_paths(ev: Any, rule: CrossoverRule) -> None:
    """The checks of one ``paths: true`` crossover rule (``ev`` is policy's evaluation)."""
    from .policy import crossover_block

    for run in ev.runs:
        if rule.targets and run.target not in rule.targets:
            continue
        series = path_series(run, rule.pattern)
        if not series:
            continue
        compared = 0
        for family, paths in sorted(series.items()):
            acc, soft = paths.get(rule.accelerated, {}), paths.get(rule.software, {})
            ratios = {size: acc[size] / soft[size] for size in acc if size in soft and soft[size] > 0}
            if len(ratios) < 2:
                ev.note(f"{run.target}/{run.variant}: {family} has no {rule.accelerated} and {rule.software} "
                        "results at two or more common block sizes")
                continue
            compared += 1
            _crossover_check(ev, run, rule, family, ratios, crossover_block(ratios), paths)
        _driver_checks(ev, run, series)
        if not compared:
            ev.note(f"{run.target}/{run.variant}: no {rule.pattern!r} items on both paths "
                    f"{rule.accelerated} and {rule.software}")


def _crossover_check(ev: Any, run: RunResult, rule: CrossoverRule, family: str, ratios: dict[int, float],
                     point: int | None, paths: dict[str, dict[int, float]]) -> None:
    from .policy import KIND_CROSSOVER

    where = "never" if point is None else f"{point} bytes"
    worst = min(ratios.values())
    problems = []
    if rule.max_block is not None and (point is None or point > rule.max_block):
        problems.append(f"crossover must be at or below {rule.max_block} bytes")
    if rule.max_slower_pct is not None and worst < 1 - rule.max_slower_pct / 100:
        problems.append(f"{rule.accelerated} is {100 * (1 - worst):.0f}% slower than {rule.software} at "
                        f"{min(ratios, key=ratios.__getitem__)} bytes (limit {rule.max_slower_pct:g}%)")
    steps = ", ".join(f"{size}: {ratio:.2f}x" for size, ratio in sorted(ratios.items()))
    msg = (f"{family}: {rule.accelerated} vs {rule.software} crossover {where} ({steps})"
           + (f"; {'; '.join(problems)}" if problems else ""))
    ev.add(run, f"{family} {rule.accelerated} vs {rule.software}", KIND_CROSSOVER, not problems, msg,
           value=float(point) if point is not None else None, unit="bytes",
           threshold=float(rule.max_block) if rule.max_block else None, metric="per_second",
           detail={"software": rule.software, "accelerated": rule.accelerated, "paths": True,
                   "crossover": point if point is not None else "never",
                   "ratios": {str(k): round(v, 3) for k, v in sorted(ratios.items())},
                   "worst_ratio": round(worst, 3), "max_slower_pct": rule.max_slower_pct,
                   "series": {p: {str(k): round(v, 1) for k, v in sorted(s.items())}
                              for p, s in sorted(paths.items())}})


def _driver_checks(ev: Any, run: RunResult, series: dict[str, dict[str, dict[int, float]]]) -> None:
    """The registered driver was the one AF_ALG used: module libwolfssl, priority as in /proc/crypto."""
    bound, proc = _bound(run)
    for family in sorted(series):
        name = f"{family} registered driver"
        if any(c.name == name and c.variant == run.variant and c.target == run.target
               for c in ev.verdict.checks):
            continue  # several rules over the same run check the driver once
        if not family.startswith("afalg:"):
            _crid_check(ev, run, name, family)
            continue
        alg = _KERNEL_ALG.get(family.split(":", 1)[1], family.split(":", 1)[1])
        lk = bound.get(f"lkcapi:{alg}")
        if lk is None:
            ev.add(run, name, KIND_OFFLOAD, False, f"{family}: no AF_ALG bind to wolfCrypt's driver recorded")
            continue
        listed = proc.get(lk.get("driver", ""), {})
        best = max((p.get("priority", -1) for p in proc.values() if p.get("name") == alg
                    and p.get("internal") != "yes"), default=-1)
        problems = []
        if lk.get("module") != WOLFCRYPT_MODULE:
            problems.append(f"bound to {lk.get('driver')} of module {lk.get('module')}, "
                            f"not {WOLFCRYPT_MODULE}")
        if listed.get("priority") != lk.get("priority"):
            problems.append(f"/proc/crypto lists priority {listed.get('priority')} for {lk.get('driver')}")
        by_name = bound.get(f"name:{alg}")
        if by_name is not None and by_name.get("driver") != lk.get("driver"):
            problems.append(f"the generic name {alg} resolved to {by_name.get('driver')}, "
                            "not wolfCrypt's driver")
        msg = (f"{family}: AF_ALG used {lk.get('driver')} (module {lk.get('module')}, priority "
               f"{lk.get('priority')}; highest listed for {alg}: {best})"
               + (f"; {'; '.join(problems)}" if problems else ""))
        ev.add(run, name, KIND_OFFLOAD, not problems, msg, value=float(lk.get("priority") or 0),
               unit="priority",
               detail={"driver": lk.get("driver"), "module": lk.get("module"), "priority": lk.get("priority"),
                       "by_name": by_name.get("driver") if by_name else None,
                       "kernel_driver": (bound.get(f"kernel:{alg}") or {}).get("driver")})


def _crid_check(ev: Any, run: RunResult, name: str, family: str) -> None:
    """FreeBSD (``freebsd_offload.py``): the driver registered a crid with the crypto framework."""
    facts = next((log.metadata for log in run.logs if "offload_crid" in log.metadata), None)
    if facts is None:
        return  # not an offload run: nothing to say about drivers
    crid = facts.get("offload_crid")
    msg = (f"{family}: wolfCrypt's driver registered crid {crid} with the crypto framework "
           f"(openssl engine {facts.get('offload_engine')})" if crid else
           f"{family}: no 'driver loaded: <crid>' line: the driver did not register with the crypto "
           "framework")
    ev.add(run, name, KIND_OFFLOAD, bool(crid), msg, value=float(crid) if crid else None, unit="crid",
           detail={"crid": crid, "engine": facts.get("offload_engine"),
                   "kern_crypto": facts.get("kern_crypto")})


# ---------------------------------------------------------------------------
# Report


def _path_checks(verdict: Verdict) -> list[Check]:
    from .policy import KIND_CROSSOVER

    return [c for c in verdict.of_kind(KIND_CROSSOVER) if c.detail.get("paths")]


def _fmt_rate(bps: float) -> str:
    return f"{bps / 1e6:.3g}"


def offload_blocks(runs: Sequence[RunResult], verdict: Verdict) -> list[Any]:
    """Markdown/HTML blocks: throughput (MB/s) by block size for every path, per run and algorithm."""
    from .report import Block, Row, Table

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
