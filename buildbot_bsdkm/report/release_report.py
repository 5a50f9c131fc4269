"""The release report: what changed from the previous release to the candidate, per matrix item.

Pure: it reads a comparison document (``comparison(...)`` builds it from the runs, the verdict
and the build facts) and renders Markdown (release notes, job summary) and HTML with two
inline SVG charts (per-item change; speedups then and now). ``release.json`` is that document.
"""

from __future__ import annotations

import html
import re
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from ..checks import STATUS_MARKS
from ..model import RunResult
from ..policy import GEOMEAN_PREFIX, PER_SECOND, CheckKind, Verdict, display_unit, measure
from .blocks import md_inline

# gcc/clang: "path/file.c:123:45: warning: text [-Wflag]", and the driver's "cc1: warning: text"
_WARNING = re.compile(r"^(?P<file>[^\s:]+)(?::\d+(?::\d+)?)?: warning: (?P<text>.*)$")


def compiler_warnings(text: str) -> Counter[str]:
    """Warnings of a build log, keyed by file name and message (line numbers move between releases)."""
    out: Counter[str] = Counter()
    for line in text.splitlines():
        m = _WARNING.match(line.strip())
        if m:
            out[f"{m['file'].rsplit('/', 1)[-1]}: {m['text'].strip()}"] += 1
    return out


def parse_size(text: str) -> dict[str, int] | None:
    """``size`` (Berkeley format) output → text/data/bss bytes."""
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 3 and all(p.isdigit() for p in parts[:3]):
            return {"text": int(parts[0]), "data": int(parts[1]), "bss": int(parts[2])}
    return None


# --------------------------------------------------------------------------- the comparison


def _names(runs: Sequence[RunResult]) -> tuple[set[str], set[str]]:
    """(self-test names seen, names that failed in any repeat)."""
    seen = {t.name for r in runs for t in r.tests}
    failed = {t.name for r in runs for t in r.tests if not t.passed}
    return seen, failed


def _bench_keys(runs: Sequence[RunResult]) -> set[str]:
    return {b.name for r in runs for b in r.benchmarks}


def _medians(runs: Sequence[RunResult]) -> dict[str, tuple[float, str]]:
    values: dict[str, list[float]] = {}
    units: dict[str, str] = {}
    for r in runs:
        for b in r.benchmarks:
            v = measure(b, PER_SECOND)
            if v is not None:
                values.setdefault(b.name, []).append(v)
                units[b.name] = display_unit(b, PER_SECOND)
    return {k: (statistics.median(v), units[k]) for k, v in values.items()}


def _speedups(runs: Mapping[str, Sequence[RunResult]], labels: Mapping[str, tuple[str, str]],
              software: str) -> dict[tuple[str, str, str], float]:
    """(target, accelerated variant, item) → accelerated/software throughput ratio of the medians."""
    out: dict[tuple[str, str, str], float] = {}
    by_tv = {labels[k]: v for k, v in runs.items() if k in labels}
    for (target, variant), reps in by_tv.items():
        soft = by_tv.get((target, software))
        if variant == software or not soft:
            continue
        fast, slow = _medians(reps), _medians(soft)
        for name, (a, _) in fast.items():
            if name in slow and slow[name][0] > 0:
                out[(target, variant, name)] = a / slow[name][0]
    return out


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 3)


def _run_status(reps: Sequence[RunResult] | None) -> str:
    if not reps:
        return "not run"
    bad = next((r.failure for r in reps if r.failure is not None), None)
    if bad is None:
        return "ok"
    return f"FAILED {bad.stage} ({bad.category}): {bad.message}"


# Per-item changes the report tabulates: timed regressions and counted instructions, side by side.
_CHANGE_KINDS = (CheckKind.REGRESSION, CheckKind.INSTRUCTIONS)


def comparison(
    *,
    items: Sequence[Mapping[str, Any]],
    candidate: Mapping[str, Sequence[RunResult]],
    previous: Mapping[str, Sequence[RunResult]],
    builds: Mapping[str, Mapping[str, Mapping[str, Any]]],
    verdict: Verdict,
    sources: Mapping[str, Mapping[str, Any]],
    software_variant: str,
    repeats: int,
) -> dict[str, Any]:
    """Everything the report shows, as plain data (``release.json``)."""
    labels = {i["label"]: (i["target"], i["variant"]) for i in items}
    run_label = {f"{i['target']}/{i['variant']}": i["label"] for i in items if i["status"] == "run"}
    rows = []
    for item in items:
        label = item["label"]
        cand, prev = candidate.get(label) or [], previous.get(label) or []
        row: dict[str, Any] = {**item, "candidate": _run_status(cand)}
        if item["status"] != "run":
            row["previous"] = "—"
        elif not item["in_previous"]:
            row["previous"] = "not in previous"
        elif sources["previous"].get("fetch_failure"):
            row["previous"] = "fetch failed"
        else:
            row["previous"] = _run_status(prev)
            bad = next((r.failure for r in prev if r.failure is not None), None)
            row["previous_failed_to_build"] = bool(bad and bad.stage in ("configure", "build", "fetch"))
        if cand and prev and not row.get("previous_failed_to_build"):
            c_seen, c_failed = _names(cand)
            p_seen, p_failed = _names(prev)
            row["selftests"] = {
                "added": sorted(c_seen - p_seen),
                "removed": sorted(p_seen - c_seen),
                "newly_failing": sorted(c_failed - p_failed),
                "fixed": sorted((p_failed - c_failed) & c_seen),
            }
            cb, pb = _bench_keys(cand), _bench_keys(prev)
            row["benchmarks"] = {"added": sorted(cb - pb), "removed": sorted(pb - cb)}
        for side in ("candidate", "previous"):
            facts = builds.get(side, {}).get(label)
            if facts:
                row[f"{side}_build"] = dict(facts)
        cw = (row.get("candidate_build") or {}).get("warnings")
        pw = (row.get("previous_build") or {}).get("warnings")
        if cw is not None and pw is not None:
            c_w, p_w = Counter(cw), Counter(pw)
            row["warnings"] = {
                "candidate": sum(c_w.values()), "previous": sum(p_w.values()),
                "new": sorted((c_w - p_w).elements()), "gone": sorted((p_w - c_w).elements()),
            }
        rows.append(row)

    changes = []
    for c in verdict.checks:
        if c.kind not in _CHANGE_KINDS:
            continue
        changes.append({
            "item": run_label.get(c.run_label, c.run_label), "name": c.name, "previous": c.baseline,
            "candidate": c.value, "unit": c.unit, "delta_pct": c.delta_pct, "limit_pct": c.threshold,
            "metric": c.metric, "verdict": c.detail.get("verdict") or ("ok" if c.passed else "regression"),
            "passed": c.passed, "message": c.message,
        })
    then = _speedups(previous, labels, software_variant)
    now = _speedups(candidate, labels, software_variant)
    speedups = [
        {"target": t, "variant": v, "name": n, "software": software_variant,
         "previous": _round(then.get(k)), "candidate": _round(now.get(k))}
        for k in sorted(set(then) | set(now)) for t, v, n in [k]
    ]
    passed_checks = [c for c in verdict.checks if c.kind not in _CHANGE_KINDS]
    return {
        "schema": 1,
        "sources": dict(sources),
        "repeats": repeats,
        "software_variant": software_variant,
        "verdict": {"passed": verdict.passed, "status": verdict.status, "summary": verdict.summary(),
                    "notes": list(verdict.notes),
                    "failures": [f"{c.run_label} {c.kind}: {c.message}" for c in verdict.failures]},
        "matrix": rows,
        "changes": changes,
        "speedups": speedups,
        "other_checks": len(passed_checks),
    }


# --------------------------------------------------------------------------- Markdown


def _md(text: Any) -> str:
    # Item, benchmark and variant names come from the candidate's logs: literal text, one line.
    return md_inline(text, in_table=True)


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{x:+.1f}%"


def _num(x: float | None) -> str:
    if x is None:
        return "—"
    return f"{x:.0f}" if abs(x) >= 100 else f"{x:.2f}"


def _size(b: Mapping[str, Any] | None) -> str:
    size = (b or {}).get("size")
    return "—" if not size else f"{size['text']}/{size['data']}/{size['bss']}"


def _limit(x: float | None) -> str:
    return "—" if x is None else f"{x:g}%"


def _secs(b: Mapping[str, Any] | None) -> str:
    value = (b or {}).get("build_s")
    return "—" if value is None else f"{value:.1f}"


def _list(xs: Sequence[str], limit: int = 8) -> str:
    if not xs:
        return "—"
    more = f" … (+{len(xs) - limit})" if len(xs) > limit else ""
    return ", ".join(xs[:limit]) + more


def _source_line(doc: Mapping[str, Any], side: str) -> str:
    s = doc["sources"][side]
    tree = s.get("tree") or {}
    version = tree.get("version") or "?"
    failed = s.get("fetch_failure")
    extra = f" — fetch FAILED: {failed['message']}" if failed else ""
    return f"{s['source']} (wolfSSL {version}){extra}"


def _word(v: Mapping[str, Any], marked: bool = False) -> str:
    """The verdict's one word (policy ``Verdict.status``; older documents carry only ``passed``)."""
    status = v.get("status") or ("pass" if v.get("passed") else "fail")
    word = {"pass": "PASS", "fail": "FAIL", "inconclusive": "INCONCLUSIVE"}.get(status, "FAIL")
    return f"{STATUS_MARKS.get(status, '❌')} {word}" if marked else word


def markdown_release(doc: Mapping[str, Any]) -> str:
    v = doc["verdict"]
    out = [
        f"## Release candidate: {_word(v, marked=True)}",
        "",
        f"- candidate: {_md(_source_line(doc, 'candidate'))}",
        f"- previous: {_md(_source_line(doc, 'previous'))}",
        f"- {doc['repeats']} interleaved repeat(s) per side; {_md(v['summary'])}",
        "",
        "### Matrix",
        "",
        "| item | status | candidate | previous | build s (prev → cand) | .ko text/data/bss (prev → cand) "
        "| warnings (prev → cand) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in doc["matrix"]:
        status = r["status"] + (f" ({r['note']})" if r.get("note") else "")
        pb, cb = r.get("previous_build"), r.get("candidate_build")
        bt = f"{_secs(pb)} → {_secs(cb)}"
        w = r.get("warnings")
        count = (cb or {}).get("warning_count")
        warn = f"{w['previous']} → {w['candidate']}" if w else ("—" if count is None else str(count))
        out.append(f"| {_md(r['label'])} | {_md(status)} | {_md(r['candidate'])} | {_md(r['previous'])} | "
                   f"{bt} | {_size(pb)} → {_size(cb)} | {warn} |")
    diffs = [r for r in doc["matrix"] if r.get("selftests") or r.get("benchmarks") or r.get("warnings")]
    if diffs:
        out += ["", "### What changed", "",
                "| item | self-tests added | removed | newly failing | benchmarks added | removed "
                "| new warnings |",
                "| --- | --- | --- | --- | --- | --- | --- |"]
        for r in diffs:
            st, bm = r.get("selftests") or {}, r.get("benchmarks") or {}
            w = (r.get("warnings") or {}).get("new", [])
            out.append(f"| {_md(r['label'])} | {_md(_list(st.get('added', [])))} | "
                       f"{_md(_list(st.get('removed', [])))} | {_md(_list(st.get('newly_failing', [])))} | "
                       f"{_md(_list(bm.get('added', [])))} | {_md(_list(bm.get('removed', [])))} | "
                       f"{_md(_list(sorted(set(w)), 4))} |")
    if doc["changes"]:
        out += ["", "### Per-item change (candidate vs previous)", "",
                "| item | benchmark | previous | candidate | unit | change | limit | verdict |",
                "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        for c in doc["changes"]:
            mark = f"✅ {c['verdict']}" if c["passed"] else f"❌ {c['verdict']}"
            out.append(f"| {_md(c['item'])} | {_md(c['name'])} | {_num(c['previous'])} "
                       f"| {_num(c['candidate'])} | {_md(c['unit'] or '')} | {_pct(c['delta_pct'])} "
                       f"| {_limit(c['limit_pct'])} | {mark} |")
    if doc["speedups"]:
        out += ["", f"### Speedups against {_md(doc['software_variant'])} (then → now)", "",
                "| target | variant | benchmark | previous | candidate |", "| --- | --- | --- | --- | --- |"]
        for s in doc["speedups"]:
            then = "—" if s["previous"] is None else f"{s['previous']:.2f}×"
            now = "—" if s["candidate"] is None else f"{s['candidate']:.2f}×"
            out.append(f"| {_md(s['target'])} | {_md(s['variant'])} | {_md(s['name'])} | {then} | {now} |")
    if v["failures"]:
        out += ["", "### Failures", ""] + [f"- {_md(f)}" for f in v["failures"][:50]]
    if v["notes"]:
        out += ["", "### Notes", ""] + [f"- {_md(n)}" for n in v["notes"][:30]]
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------- HTML + charts


def change_svg(changes: Sequence[Mapping[str, Any]], *, width: int = 760, bar: int = 16) -> str:
    """Horizontal bars of each item's change in percent, red beyond its limit."""
    rows = [c for c in changes
            if c.get("delta_pct") is not None and not str(c["name"]).startswith(GEOMEAN_PREFIX)]
    if not rows:
        return "<p>No per-item changes to chart.</p>"
    label_w, pad = 330, 6
    span = max(10.0, *(abs(c["delta_pct"]) for c in rows), *(c["limit_pct"] or 0 for c in rows))
    mid = label_w + (width - label_w) / 2
    scale = (width - label_w - 120) / 2 / span  # room for the percentage beside the longest bar
    height = pad * 2 + len(rows) * (bar + 4) + 16
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'font-family="sans-serif" font-size="11" role="img" aria-label="per-item change">',
             f'<line x1="{mid}" y1="0" x2="{mid}" y2="{height - 14}" stroke="#555"/>']
    for i, c in enumerate(rows):
        y = pad + i * (bar + 4)
        d = float(c["delta_pct"])
        x, w = (mid, d * scale) if d >= 0 else (mid + d * scale, -d * scale)
        color = "#c62828" if not c["passed"] else "#9e9e9e" if c["verdict"] == "inconclusive" else "#2e7d32"
        label = html.escape(f"{c['item']} {c['name']}")
        parts.append(f'<text x="{label_w - 6}" y="{y + bar - 4}" text-anchor="end">{label}</text>')
        parts.append(f'<rect x="{x:.1f}" y="{y}" width="{max(w, 1):.1f}" height="{bar}" fill="{color}"/>')
        tx = mid + (d * scale + 4 if d >= 0 else d * scale - 4)
        anchor = "start" if d >= 0 else "end"
        parts.append(f'<text x="{tx:.1f}" y="{y + bar - 4}" text-anchor="{anchor}">{d:+.1f}%</text>')
    parts.append(f'<text x="{mid}" y="{height - 2}" text-anchor="middle">change vs previous (right is '
                 f'faster; red: regression, grey: inconclusive)</text></svg>')
    return "".join(parts)


def speedup_then_now_svg(speedups: Sequence[Mapping[str, Any]], *, width: int = 760, bar: int = 9) -> str:
    """Paired bars per item: the previous release's speedup (grey) and the candidate's (blue)."""
    rows = [s for s in speedups if s.get("previous") is not None or s.get("candidate") is not None]
    if not rows:
        return "<p>No speedups to chart (needs an accelerated and a software variant on one target).</p>"
    label_w, pad = 330, 6
    top = max(float(s.get(k) or 0) for s in rows for k in ("previous", "candidate")) or 1.0
    scale = (width - label_w - 60) / top
    step = bar * 2 + 6
    height = pad * 2 + len(rows) * step + 16
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'font-family="sans-serif" font-size="11" role="img" aria-label="speedups then and now">']
    for i, s in enumerate(rows):
        y = pad + i * step
        label = html.escape(f"{s['target']} {s['variant']} {s['name']}")
        parts.append(f'<text x="{label_w - 6}" y="{y + bar + 3}" text-anchor="end">{label}</text>')
        for j, (key, color) in enumerate((("previous", "#9e9e9e"), ("candidate", "#1565c0"))):
            val = s.get(key)
            if val is None:
                continue
            yy = y + j * bar
            parts.append(f'<rect x="{label_w}" y="{yy}" width="{max(val * scale, 1):.1f}" height="{bar - 1}" '
                         f'fill="{color}"/>')
            parts.append(f'<text x="{label_w + val * scale + 4:.1f}" y="{yy + bar - 1}">{val:.2f}×</text>')
    parts.append(f'<text x="{label_w}" y="{height - 2}">grey: previous, blue: candidate '
                 f'(× {html.escape(str(rows[0]["software"]))})</text></svg>')
    return "".join(parts)


_CSS = """body{font-family:sans-serif;margin:1.2em;max-width:1100px;color:#222}
table{border-collapse:collapse;margin:.5em 0;font-size:13px}td,th{border:1px solid #ccc;padding:3px 6px}
th{background:#f0f0f0}.pass{color:#2e7d32}.fail{color:#c62828}h1{font-size:22px}h2{font-size:17px}"""


def _table(head: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{th}</tr>{body}</table>"


def html_release(doc: Mapping[str, Any]) -> str:
    v = doc["verdict"]
    cls = "pass" if v["passed"] else "fail"
    matrix = [[r["label"], r["status"] + (f" ({r['note']})" if r.get("note") else ""), r["candidate"],
               r["previous"], f"{_secs(r.get('previous_build'))} → {_secs(r.get('candidate_build'))}",
               f"{_size(r.get('previous_build'))} → {_size(r.get('candidate_build'))}",
               (f"{r['warnings']['previous']} → {r['warnings']['candidate']}" if r.get("warnings") else "—")]
              for r in doc["matrix"]]
    diffs = [[r["label"], _list((r.get("selftests") or {}).get("added", [])),
              _list((r.get("selftests") or {}).get("removed", [])),
              _list((r.get("selftests") or {}).get("newly_failing", [])),
              _list((r.get("benchmarks") or {}).get("added", [])),
              _list((r.get("benchmarks") or {}).get("removed", []))]
             for r in doc["matrix"] if r.get("selftests") or r.get("benchmarks")]
    changes = [[c["item"], c["name"], _num(c["previous"]), _num(c["candidate"]), c["unit"] or "",
                _pct(c["delta_pct"]), _limit(c["limit_pct"]), c["verdict"]] for c in doc["changes"]]
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>bsdkm-ci release report</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>Release candidate: <span class='{cls}'>{_word(v)}</span></h1>",
        f"<p>candidate: {html.escape(_source_line(doc, 'candidate'))}<br>"
        f"previous: {html.escape(_source_line(doc, 'previous'))}<br>"
        f"{html.escape(str(doc['repeats']))} interleaved repeat(s) per side; {html.escape(v['summary'])}</p>",
        "<h2>Matrix</h2>",
        _table(["item", "status", "candidate", "previous", "build s (prev → cand)",
                ".ko text/data/bss (prev → cand)", "warnings (prev → cand)"], matrix),
        "<h2>Per-item change</h2>", change_svg(doc["changes"]),
        f"<h2>Speedups against {html.escape(doc['software_variant'])}: then and now</h2>",
        speedup_then_now_svg(doc["speedups"]),
    ]
    if diffs:
        parts += ["<h2>Self-tests and benchmark items</h2>",
                  _table(["item", "self-tests added", "removed", "newly failing", "benchmarks added",
                          "removed"], diffs)]
    if changes:
        parts += ["<h2>Per-item change table</h2>",
                  _table(["item", "benchmark", "previous", "candidate", "unit", "change", "limit", "verdict"],
                         changes)]
    if v["failures"]:
        parts += ["<h2>Failures</h2><ul>", *(f"<li>{html.escape(x)}</li>" for x in v["failures"][:50]),
                  "</ul>"]
    if v["notes"]:
        parts += ["<h2>Notes</h2><ul>", *(f"<li>{html.escape(n)}</li>" for n in v["notes"][:30]), "</ul>"]
    parts.append("</body></html>")
    return "\n".join(parts)

