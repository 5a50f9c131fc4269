"""A verdict's human report as blocks (headings, paragraphs, tables): its content, once.

The renderers turn these blocks into Markdown (``report/markdown.py``: the PR comment, the GitHub job
summary) and standalone HTML (``report/html_page.py``, with the charts of ``report/charts.py``), so
both always say the same thing. The blocks themselves are ``report/blocks.py``'s.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

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
)
from .instruction_report import instruction_blocks, instruction_summary
from .offload_paths import offload_blocks
from .triage_sections import triage_blocks

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
    blocks += offload_blocks(runs, verdict)  # AF_ALG / devcrypto paths by block size (offload_paths.py)
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


def delta_blocks(verdict: Verdict) -> list[Block]:
    """A baseline comparison: verdict, notes, failures, the perf gate and every item's delta."""
    return [Block(VERDICT_BLOCK, _verdict_line(verdict)), *[Block("note", n) for n in verdict.notes],
            *_failures_block(verdict), *perf_blocks(verdict), Block("h3", "Change versus the base"),
            Block("table", table=_delta_table(verdict))]



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
