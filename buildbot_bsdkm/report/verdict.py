"""Human reports of a verdict: Markdown (PR comment, GitHub job summary) and standalone HTML.

Both are rendered from one list of blocks (headings, paragraphs, tables) so they always say
the same thing. GitHub caps a comment / job summary at 65536 characters, so the Markdown
renderer drops the least important table rows first (passing items with the smallest
change), never a failure, and says how many rows it left out.
"""

from __future__ import annotations

import html
import math
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any
from xml.sax.saxutils import escape as xml_escape

from ..checks import STATUS_FAIL, STATUS_INCONCLUSIVE, STATUS_MARKS, STATUS_PASS
from ..model import LogFormat, RunResult
from ..policy import Check, CheckKind, Verdict, fmt_num, measure, policy_label
from ..policy import kernel_health as kh
from ..support.redact import redact_text
from .blocks import (
    BENCHMARK_ROW,
    COMPARISON_ROW,
    KEEP,
    SELFTEST_ROW,
    Block,
    Row,
    Table,
    code,
    html_inline,
    md_inline,
    md_paragraph,
    md_url,
    plain,
    unlinked,
)
from .instructions import instruction_blocks, instruction_summary
from .offload import OFFLOAD_HEADING, offload_blocks, offload_svg
from .triage_sections import triage_blocks

DEFAULT_MAX_CHARS = 65536


# ---------------------------------------------------------------------------
# Content


def fmt_cycles(x: float) -> str:
    """Cycles as wolfCrypt prints them (2 decimals per byte), whole numbers once they are large."""
    return f"{x:.0f}" if x >= 1000 else f"{x:g}"


def _status(passed: bool) -> str:
    return "pass" if passed else "FAIL"


VERDICT_BLOCK = "verdict"  # the headline: a paragraph in Markdown, its mark drawn in HTML (verdict_mark_svg)


def _verdict_line(verdict: Verdict) -> str:
    return verdict.headline()  # the policy's one verdict rule: pass, fail or inconclusive


def _failures_block(verdict: Verdict) -> list[Block]:
    """Every failed check under its triage word (New, Pre-existing, Known issues, Flaky), and what
    the change fixed (report/triage_sections.py)."""
    return triage_blocks(verdict)


def _not_run_blocks(verdict: Verdict) -> list[Block]:
    """The runs this machine could not do, each with why and the key that would make it possible."""
    if not verdict.not_run:
        return []
    table = Table(["run", "not run because"],
                  [Row([f"{n['target']}/{n['variant']}" + (f" ({n['part']})" if n.get("part") else ""),
                        n["reason"]], KEEP) for n in verdict.not_run])
    return [Block("h3", "Not run"), Block("table", table=table)]


def _selftest_blocks(runs: Sequence[RunResult], verdict: Verdict) -> list[Block]:
    summary = Table(["run", "self-tests", "passed", "failed", "log complete"])
    failed = Table(["run", "test", "error"])
    for run in runs:
        tests = run.tests
        if not tests and all(log.selftest_summary is None for log in run.logs) and run.complete:
            continue  # a benchmark-only run: nothing to say about self-tests
        bad = [t for t in tests if not t.passed]
        said = {log.selftest_summary for log in run.logs} - {None}
        counted = f"{len(tests)}" if tests else ("summary line only" if said else "none")
        summary.rows.append(Row([f"{run.target}/{run.variant}", counted, str(len(tests) - len(bad)),
                                 str(len(bad)), "yes" if run.complete else "NO"],
                                KEEP if bad or not run.complete else SELFTEST_ROW))
        for t in bad:
            failed.rows.append(Row([f"{run.target}/{run.variant}", t.name, (t.error or "").strip()]))
    blocks = [Block("h3", "Self-tests"), Block("table", table=summary)]
    if failed.rows:
        blocks.append(Block("table", table=failed))
    return blocks


def _benchmark_table(run: RunResult, verdict: Verdict) -> Table:
    gates: dict[int, Check] = {}
    for c in verdict.checks:
        if c.kind == CheckKind.REGRESSION and c.item is not None and c.variant == run.variant \
                and c.target == run.target:
            gates[c.item] = c
    table = Table(["benchmark", "value", "cycles", "baseline", "delta", "limit", "status"])
    for i, b in enumerate(run.benchmarks):
        gate = gates.get(i)
        rate = measure(b, "per_second")
        value = f"{fmt_num(b.value)} {b.unit}" if rate is not None else (b.error or "failed")
        cycles = f"{fmt_cycles(b.cycles)} {b.cycles_unit}" if b.cycles is not None else ""
        timing = verdict.mis_timed_row(run.target, run.variant, b.name)  # the table's own clock check
        if timing is not None:
            cycles += (f" (mis-timed: {timing['clock_hz'] / 1e9:.2f} GHz, the log "
                       f"{timing['log_hz'] / 1e9:.2f} GHz)")
        if gate is None:
            status = "FAIL" if b.failed else ("mis-timed" if timing is not None else "")
            table.rows.append(Row([b.name, value, cycles, "", "", "", status],
                                  KEEP if b.failed or timing is not None else BENCHMARK_ROW))
            continue
        base = f"{fmt_num(gate.baseline)} {gate.unit}" if gate.baseline is not None else ""
        delta = f"{gate.delta_pct:+.1f}%" if gate.delta_pct is not None else ""
        limit = f"{gate.threshold:g}%" if gate.threshold is not None else ""
        if gate.metric == "cycles":
            delta += " (cycles)"
        table.rows.append(Row([b.name, value, cycles, base, delta, limit, regression_status(gate)],
                              KEEP if not gate.passed else BENCHMARK_ROW, abs(gate.delta_pct or 0.0)))
    for c in verdict.checks:  # run-wide gates (geometric mean) get a row of their own
        if c.is_geomean and c.variant == run.variant \
                and c.target == run.target:
            table.rows.append(Row([c.name, _signed_pct(c.value), "", "", "", _limit_pct(c.threshold),
                                   regression_status(c)], KEEP))
    return table


def _benchmark_blocks(runs: Sequence[RunResult], verdict: Verdict) -> list[Block]:
    blocks: list[Block] = []
    for run in runs:
        if run.benchmarks:
            # folded per variant: a job summary / PR comment opens on the verdict, not on tables
            blocks += [Block("details", f"{run.target}/{run.variant}: {len(run.benchmarks)} benchmarks"),
                       Block("h3", f"Benchmarks: {run.target}/{run.variant}"),
                       Block("table", table=_benchmark_table(run, verdict)), Block("details-end", "")]
    return blocks


def _speedup_blocks(verdict: Verdict) -> list[Block]:
    checks = verdict.of_kind(CheckKind.SPEEDUP)
    if not checks:
        return []
    table = Table(["target", "benchmark", "accelerated", "software", "speedup", "minimum", "status"])
    for c in checks:
        d = c.detail
        unit = d.get("value_unit", "")
        fast = f"{c.variant}: {fmt_num(d.get('accelerated_value', 0))} {unit}"
        slow = f"{d.get('software', '?')}: {fmt_num(d.get('software_value', 0))} {unit}"
        table.rows.append(Row([c.target, c.name, fast, slow,
                               f"{c.value:.2f}x", f"{c.threshold:g}x", _status(c.passed)],
                              KEEP if not c.passed else COMPARISON_ROW, c.value or 0.0))
    return [Block("h3", "Speedups (accelerated vs software)"), Block("table", table=table)]


def _crossover_blocks(verdict: Verdict) -> list[Block]:
    checks = verdict.of_kind(CheckKind.CROSSOVER)
    if not checks:
        return []
    table = Table(["target", "benchmark", "compared", "crossover", "speed ratio by block size", "status"])
    for c in checks:
        point = c.detail.get("crossover")
        where = "never" if point == "never" else f"{point} bytes"
        ratios = ", ".join(f"{k}: {v:.2f}x" for k, v in c.detail.get("ratios", {}).items())
        table.rows.append(Row([c.target, c.name, f"{c.variant} vs {c.detail.get('software', '?')}", where,
                               ratios, _status(c.passed)], KEEP if not c.passed else COMPARISON_ROW))
    return [Block("h3", "Crossover block sizes"), Block("table", table=table)]


def _retry_blocks(retries: Sequence[Mapping[str, Any]] | None) -> list[Block]:
    if not retries:
        return []
    columns: list[str] = []
    for r in retries:
        columns += [k for k in r if k not in columns]
    table = Table(columns, [Row([str(r.get(k, "")) for k in columns]) for r in retries])
    return [Block("h3", "Retries"), Block("table", table=table)]


def report_blocks(runs: Sequence[RunResult], verdict: Verdict, *,
                  retries: Sequence[Mapping[str, Any]] | None = None,
                  links: Mapping[str, str] | None = None) -> list[Block]:
    """The report's content, shared by the Markdown and HTML renderers."""
    runs = [r for r in runs if not r.not_run]  # said once, in the verdict line and "Not run"
    blocks = [Block("h2", "bsdkm-ci results"), Block(VERDICT_BLOCK, _verdict_line(verdict))]
    blocks += instruction_summary(runs, verdict)  # "instructions: +0.80 % (SHA-256) ...", one line
    if links:
        blocks.append(Block("links", table=Table(list(links), [Row(list(links.values()))])))
    blocks += [Block("note", n) for n in verdict.notes]
    blocks += _failures_block(verdict)
    blocks += _not_run_blocks(verdict)
    blocks += _kernel_blocks(runs, verdict)
    if any(c.kind == CheckKind.SELFTEST for c in verdict.checks):
        blocks += _selftest_blocks(runs, verdict)
    blocks += _speedup_blocks(verdict) + _crossover_blocks(verdict)
    blocks += offload_blocks(runs, verdict)  # AF_ALG / devcrypto paths by block size (report/offload.py)
    blocks += perf_blocks(verdict)
    blocks += instruction_blocks(runs, verdict)  # counted instructions beside the clock's
    blocks += _benchmark_blocks(runs, verdict)
    blocks += _retry_blocks(retries)
    source = _source_line(runs)
    if source:
        blocks.append(Block("p", source))
    blocks += [Block("p", line) for line in _kernel_lines(runs)]
    name, packaged, _ = _policy_name(verdict.policy_source).partition(" (packaged)")
    blocks.append(Block("p", f"Policy: {code(name)}{packaged}"))
    return blocks


def _policy_name(source: str) -> str:
    """The verdict's policy as reports name it; a document judged before names were kept gives an
    absolute path, shown by the name alone."""
    return policy_label(source) if os.path.isabs(source) else source


def _source_line(runs: Sequence[RunResult]) -> str | None:
    """What was built (e.g. a PR's ``refs/pull/N/head`` at its commit), so nobody has to guess."""
    seen: list[str] = []
    for run in runs:
        origin = run.metadata.get("source")
        if not origin:
            continue
        commit = run.metadata.get("source_commit")
        # redacted again here: results written before credentials were kept out of them
        text = code(redact_text(str(origin))) + (f" at {code(str(commit)[:12])}" if commit else "")
        if text not in seen:
            seen.append(text)
    return "Source: " + ", ".join(seen) if seen else None


def _kernel_lines(runs: Sequence[RunResult]) -> list[str]:
    """What each kernel booted was (``metadata["kernels"]``: a FreeBSD set's name, REVISION,
    BUILDDATE, GITBRANCH and MANIFEST digest), once per target: enough to boot the same again."""
    seen: dict[str, list[str]] = {}
    for run in runs:
        kernels = run.metadata.get("kernels")
        if not isinstance(kernels, dict):
            continue
        for kind, facts in sorted(kernels.items()):
            summary = facts.get("summary") if isinstance(facts, dict) else None
            text = f"{kind}: {code(str(summary))}" if summary else None
            if text and text not in seen.setdefault(run.target, []):
                seen[run.target].append(text)
    return [f"Kernels ({target}): " + "; ".join(lines) for target, lines in seen.items()]


# ---------------------------------------------------------------------------
# Markdown


# Every block is escaped here, in the one place blocks become Markdown (report/blocks.py md_inline):
# names come from PR-controlled logs and results, and whoever adds a block adds plain text.


def _md_text(text: str) -> str:
    """Untrusted text as literal inline Markdown on one line."""
    return md_inline(text)


def _md_cell(text: str) -> str:
    return md_inline(text, in_table=True)


def _md_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(_md_cell(c) for c in cells) + " |\n"


def _md_block(block: Block) -> str:
    if block.kind == "details":
        # One line: a newline in a name must not end the HTML block and start Markdown (a link).
        summary = unlinked(html.escape(" ".join(plain(block.text).split())))
        return f"<details><summary>{summary}</summary>\n\n"
    if block.kind == "details-end":
        return "</details>\n\n"
    if block.kind == "h2":
        return f"## {_md_text(block.text)}\n\n"
    if block.kind == "h3":
        return f"### {_md_text(block.text)}\n\n"
    if block.kind == "note":
        return f"> **Note:** {md_inline(block.text)}\n\n"
    if block.kind == "links" and block.table:
        pairs = zip(block.table.header, block.table.rows[0].cells, strict=True)
        return " · ".join(f"[{_md_cell(k)}]({md_url(v)})" for k, v in pairs) + "\n\n"
    if block.kind == "table" and block.table is not None:
        t = block.table
        if not t.rows and t.omitted:
            return f"_All {t.omitted} row(s) of this table omitted to fit the size limit._\n\n"
        header, rows = t.shown()
        text = _md_row(header) + _md_row(["---"] * len(header))
        text += "".join(_md_row(cells) for cells in rows)
        if t.omitted:
            text += f"\n_{t.omitted} less important row(s) omitted to fit the size limit._\n"
        return text + "\n"
    return f"{md_paragraph(block.text)}\n\n"  # "p" and any other kind: plain text


_TRIM_NOTE_ROOM = 400  # the closing note and the per-table "rows omitted" notes


def _trim(blocks: list[Block], max_chars: int) -> int:
    """Drop droppable rows, least important first, until the Markdown fits; returns how many."""
    tables = [b.table for b in blocks if b.kind == "table" and b.table is not None]
    candidates = [(row.priority, -row.weight, -i, table, row) for table in tables
                  for i, row in enumerate(table.rows) if row.priority != KEEP]
    candidates.sort(key=lambda c: c[:3], reverse=True)
    budget = max_chars - _TRIM_NOTE_ROOM
    dropped: set[int] = set()
    size = sum(len(_md_block(b)) for b in blocks)
    while size > budget and len(dropped) < len(candidates):
        # estimate the rows to drop from the overflow, then measure again: emptied tables shrink more
        overflow = size - budget
        for _, _, _, table, row in candidates:
            if overflow <= 0:
                break
            if id(row) in dropped:
                continue
            dropped.add(id(row))
            table.omitted += 1
            overflow -= len(_md_row(row.cells))
        for table in tables:
            table.rows = [r for r in table.rows if id(r) not in dropped]
        size = sum(len(_md_block(b)) for b in blocks)
    return len(dropped)


def markdown_report(runs: Sequence[RunResult], verdict: Verdict, *,
                    retries: Sequence[Mapping[str, Any]] | None = None,
                    links: Mapping[str, str] | None = None, max_chars: int = DEFAULT_MAX_CHARS) -> str:
    """Markdown for a PR comment / job summary, at most ``max_chars`` characters."""
    blocks = report_blocks(runs, verdict, retries=retries, links=links)
    dropped = _trim(blocks, max_chars)
    text = "".join(_md_block(b) for b in blocks)
    if dropped:
        text += f"_Report trimmed to {max_chars} characters: {dropped} passing row(s) left out; " \
                "every failure is shown. The full data is in the JUnit and JSON artifacts._\n"
    if len(text) > max_chars:  # failures alone exceed the limit: cut, and say so
        tail = "\n\n_… report cut at the size limit; see the JUnit artifact for the rest._\n"
        text = text[: max(0, max_chars - len(tail))] + tail
    return text


def _delta_table(verdict: Verdict) -> Table:
    table = Table(["run", "benchmark", "base", "head", "delta", "limit", "status"])
    for c in verdict.of_kind(CheckKind.REGRESSION):
        unit = f" {c.unit}" if c.unit and c.unit != "%" else ""
        base = f"{fmt_num(c.baseline)}{unit}" if c.baseline is not None else ""
        head = f"{fmt_num(c.value)}{unit}" if c.value is not None and c.unit != "%" else ""
        delta = _signed_pct(c.delta_pct) + (" (cycles)" if c.metric == "cycles" else "")
        cells = [c.run_label, c.name, base, head, delta, _limit_pct(c.threshold), regression_status(c)]
        table.rows.append(Row(cells, KEEP if not c.passed else BENCHMARK_ROW, abs(c.delta_pct or 0.0)))
    return table


def delta_report(verdict: Verdict, *, max_chars: int = DEFAULT_MAX_CHARS) -> str:
    """Markdown of a baseline comparison: verdict, failures, and every item's delta."""
    blocks = [Block(VERDICT_BLOCK, _verdict_line(verdict)), *[Block("note", n) for n in verdict.notes],
              *_failures_block(verdict), *perf_blocks(verdict), Block("h3", "Change versus the base"),
              Block("table", table=_delta_table(verdict))]
    dropped = _trim(blocks, max_chars)
    text = "".join(_md_block(b) for b in blocks)
    if dropped:
        text += f"_Trimmed to {max_chars} characters: {dropped} passing row(s) left out._\n"
    return text


# ---------------------------------------------------------------------------
# HTML and the speedup chart


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



# ---------------------------------------------------------------------------
# Kernel health: what the kernel said while the module ran


_KERNEL_EVIDENCE_RECORDS = 4  # records whose log lines are shown
_KERNEL_EVIDENCE_LINES = 12
_KERNEL_NOISE = re.compile(r"^(?:\[\s*[\d.]+\] ?)?\s*(?:Code:|R[SB]P:|R[A-D]X:|R\d+:|RSI:|RDI:|FS:|CS:"
                           r"|CR2:|PKRU:|DR\d:|Hardware name:|\? )")


def _kernel_blocks(runs: Sequence[RunResult], verdict: Verdict) -> list[Block]:
    kernel_logs = [log for run in runs for log in run.logs
                   if LogFormat(log.format).kernel or log.kernel]
    notes = [f"{run.target}/{run.variant}: {run.metadata['benchmark_skipped']}"
             for run in runs if run.metadata.get("benchmark_skipped")]
    if not kernel_logs and not notes:
        return []
    blocks = [Block("h3", "Kernel health")]
    blocks += [Block("note", f"Skipped under emulation: {n}") for n in notes]
    judged = {(c.run_label, c.detail.get("source"), (c.detail.get("lines") or [None])[0]): c
              for c in verdict.checks if c.kind == CheckKind.KERNEL}
    table = Table(["run", "kind", "verdict", "whose", "duration", "process", "function",
                   "first module frames", "log lines"])
    shown = []
    for run in runs:
        for log, ev in kh.records(run):
            check = judged.get((f"{run.target}/{run.variant}", log.source, ev.line))
            if check is not None:
                severity = check.detail.get("severity", "fail" if not check.passed else "warn")
                whose = check.detail.get("classification", "")
                status = "FAIL" if not check.passed else ("warning" if severity == "warn" else "pass")
            else:  # ignored by the policy (or never gated): still shown
                whose = kh.judge(ev, run.target, kh.KernelRules()).classification
                status = "not gated"
            where = f"{ev.line}" if ev.end_line in (None, ev.line) else f"{ev.line}-{ev.end_line}"
            table.rows.append(Row([
                f"{run.target}/{run.variant}", kh.LABELS.get(ev.kind, ev.kind), status, whose,
                f"{ev.duration_s:g} s" if ev.duration_s is not None else "",
                f"{ev.process}:{ev.pid}" if ev.process and ev.pid is not None else (ev.process or ""),
                ev.function or "", ", ".join(ev.module_frames[:3]), f"{log.source}:{where}",
            ], KEEP if status in ("FAIL", "warning") else SELFTEST_ROW))
            shown.append((status, run, log, ev))
    if not table.rows:
        blocks.append(Block("p", f"No kernel trouble in {len(kernel_logs)} kernel log(s): no oops, "
                                 "warning, lockup, stall, hung task or panic."))
        return blocks
    tally = {k: sum(1 for s in shown if s[0] == k) for k in ("FAIL", "warning", "not gated")}
    blocks.append(Block("p", f"{len(shown)} kernel record(s): {tally['FAIL']} failing, "
                             f"{tally['warning']} warning(s), {tally['not gated']} not gated."))
    blocks.append(Block("table", table=table))
    shown.sort(key=lambda s: {"FAIL": 0, "warning": 1}.get(s[0], 2))
    for status, run, _log, ev in shown[:_KERNEL_EVIDENCE_RECORDS]:
        lines = Table([f"{run.target}/{run.variant} {kh.LABELS.get(ev.kind, ev.kind)} ({status})", "log"])
        telling = [t for t in ev.evidence if not _KERNEL_NOISE.match(t)]  # registers and code bytes
        for i, text in enumerate(telling[:_KERNEL_EVIDENCE_LINES]):
            lines.rows.append(Row([str(ev.line) if i == 0 else "", text], BENCHMARK_ROW, 1.0))
        if len(ev.evidence) > _KERNEL_EVIDENCE_LINES:
            lines.rows.append(Row(["", f"... the whole splat is lines {ev.line}-{ev.end_line} of the log"],
                                  BENCHMARK_ROW, 1.0))
        blocks.append(Block("table", table=lines))
    return blocks


# ---------------------------------------------------------------------------
# Perf gate (learned limits): one row per item with its interval, limit and verdict


def _signed_pct(x: float | None) -> str:
    return "" if x is None else f"{x:+.1f}%"


def _limit_pct(x: float | None) -> str:
    return "" if x is None else f"{x:g}%"


def regression_status(c: Check) -> str:
    """pass / FAIL, or a learned-limit verdict (inconclusive is shown as such, never as pass)."""
    verdict = c.detail.get("verdict") if c.detail.get("learned") else None
    if verdict is None or verdict == "regression":
        return _status(c.passed)
    return verdict


def _frac(x: float | None) -> str:
    return "" if x is None else f"{x * 100:+.1f}%"


def perf_blocks(verdict: Verdict) -> list[Block]:
    """Per run: change, interval, limit, minimum detectable change and verdict of every item."""
    blocks: list[Block] = []
    for run in verdict.perf:
        table = Table(["benchmark", "change", "interval", "limit", "min detectable", "repeats", "verdict"])
        rows = [*run["items"], *([run["geomean"]] if run.get("geomean") else [])]
        for i in rows:
            name = i["name"] + (" (cycles)" if i.get("mis_timed") else "")
            interval = f"{_frac(i['ci_low'])} .. {_frac(i['ci_high'])}" if i["ci_low"] is not None else ""
            limit = f"-{i['limit'] * 100:.1f}%" if i["limit"] is not None else ""
            mdc = f"{i['min_detectable'] * 100:.1f}%" if i["min_detectable"] is not None else ""
            why = i["verdict"] == "inconclusive" and i["reason"]
            word = i["verdict"] + (f" ({i['reason']})" if why else "")
            keep = i["verdict"] in ("regression", "inconclusive") or i["name"] == "geomean"
            table.rows.append(Row([name, _frac(i["change"]), interval, limit, mdc,
                                   f"{i['n_base']} vs {i['n_head']}", word],
                                  KEEP if keep else BENCHMARK_ROW, abs(i["change"] or 0.0)))
        head = (f"{PERF_HEADING}{run['target']}/{run['variant']} — {run['verdict']} "
                f"({run['family']} tests share a {run['alpha'] * 100:g} % false-alarm budget; "
                f"{_compared_with(run.get('base_from'))})")
        blocks += [Block("h3", head), Block("table", table=table)]
        odd = [i["name"] for i in rows if i["verdict"] == "inconclusive"]
        if odd:
            blocks.append(Block("p", f"Inconclusive (not judged, not passed): {', '.join(odd)}"))
    return blocks


def _compared_with(base_from: Any) -> str:
    """What the head was measured against: the base's runs (built beside it, given with ``--base``
    or ``--baseline``, or the configured baseline file), or, with none, this machine's history."""
    return "against this machine's history" if base_from == "history" else "against the base's runs"


PERF_HEADING = "Performance: "
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
