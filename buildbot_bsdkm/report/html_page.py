"""A verdict's report as a standalone HTML page: the Markdown's content, with its charts.

The content is ``report/verdict.py``'s blocks; the charts are ``report/charts.py``'s, each drawn after
the heading of its section.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

from ..checks import STATUS_FAIL, STATUS_INCONCLUSIVE, STATUS_MARKS, STATUS_PASS
from ..model import RunResult
from ..policy import CheckKind, Verdict
from .blocks import Block, html_inline, plain
from .charts import perf_trend_svg, speedup_svg
from .offload_paths import OFFLOAD_HEADING, offload_svg
from .verdict import PERF_HEADING, VERDICT_BLOCK, report_blocks


def _html_block(block: Block) -> str:
    e = html.escape
    if block.kind == "details":
        return f"<details open><summary>{e(plain(block.text))}</summary>"
    if block.kind == "details-end":
        return "</details>"
    if block.kind in ("h2", "h3"):
        return f"<{block.kind}>{html_inline(block.text)}</{block.kind}>"
    if block.kind == "note":
        return f'<p class="note"><strong>Note:</strong> {html_inline(block.text)}</p>'
    if block.kind == VERDICT_BLOCK:
        return _html_verdict(block.text)
    if block.kind == "links" and block.table:
        pairs = zip(block.table.header, block.table.rows[0].cells, strict=True)
        return "<p>" + " · ".join(f'<a href="{e(plain(v))}">{e(plain(k))}</a>' for k, v in pairs) + "</p>"
    if block.kind == "table" and block.table is not None:
        header, rows = block.table.shown()
        head = "".join(f"<th>{html_inline(h)}</th>" for h in header)
        body = "".join("<tr" + (' class="fail"' if "FAIL" in cells else "") + ">"
                       + "".join(f"<td>{html_inline(c)}</td>" for c in cells) + "</tr>" for cells in rows)
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    return f"<p>{html_inline(block.text)}</p>"


# The verdict's mark drawn, not written: an emoji (✅ ❌ ⚠️) needs an emoji font, which a fresh
# machine's browser may not have (it showed an empty box); these need none.
_MARK_COLOURS = {STATUS_PASS: "#1a7f37", STATUS_FAIL: "#cf222e", STATUS_INCONCLUSIVE: "#9a6700"}
_MARK_PATHS = {
    STATUS_PASS: '<path d="M4.5 8.5l2.5 2.5 5-6" fill="none" stroke="#fff" stroke-width="2"/>',
    STATUS_FAIL: '<path d="M5 5l6 6M11 5l-6 6" stroke="#fff" stroke-width="2"/>',
    STATUS_INCONCLUSIVE: '<path d="M8 4v5" stroke="#fff" stroke-width="2"/><circle cx="8" cy="11.8" r="1.2" '
                         'fill="#fff"/>',
}


def verdict_mark_svg(status: str) -> str:
    """The verdict's mark as inline SVG (a green tick, a red cross, an amber exclamation)."""
    colour = _MARK_COLOURS.get(status, _MARK_COLOURS[STATUS_FAIL])
    path = _MARK_PATHS.get(status, _MARK_PATHS[STATUS_FAIL])
    return (f'<svg class="mark" xmlns="http://www.w3.org/2000/svg" width="16" height="16" '
            f'viewBox="0 0 16 16" role="img" aria-label="{status}">'
            f'<circle cx="8" cy="8" r="8" fill="{colour}"/>{path}</svg>')


def _html_verdict(headline: str) -> str:
    """The headline with its emoji mark replaced by the drawn one."""
    for status, mark in STATUS_MARKS.items():
        if headline.startswith(mark + " "):
            text = headline.removeprefix(mark + " ")
            return f'<p class="verdict">{verdict_mark_svg(status)} {html_inline(text)}</p>'
    return f'<p class="verdict">{html_inline(headline)}</p>'


_CSS = ("body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin-bottom:1em}"
        "td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}tr.fail td{background:#ffebe9}"
        ".note{background:#fff8c5;padding:4px}.verdict{font-weight:bold}.mark{vertical-align:-2px}")


def html_report(runs: Sequence[RunResult], verdict: Verdict, *,
                retries: Sequence[Mapping[str, Any]] | None = None,
                links: Mapping[str, str] | None = None) -> str:
    """Standalone HTML page with the same content as the Markdown, plus the speedup chart."""
    blocks = report_blocks(runs, verdict, retries=retries, links=links)
    body = []
    for b in blocks:
        body.append(_html_block(b))
        if b.kind == "h3" and b.text.startswith("Speedups"):
            body.append(speedup_svg(verdict.of_kind(CheckKind.SPEEDUP)))
        if b.kind == "h3" and b.text.startswith(OFFLOAD_HEADING):
            body.append(offload_svg(runs, verdict))
        if b.kind == "h3" and b.text.startswith(PERF_HEADING):
            body.append(perf_trend_svg(verdict, b.text))
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>bsdkm-ci results</title>"
            f"<style>{_CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")
