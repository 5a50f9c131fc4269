"""A bisection's report: Markdown, HTML and JSON of one ``bisection.search.BisectResult``.

The steps (commit, result, rounds, time), the culprit with its evidence and the verification
runs, the total build time. Commit subjects and authors come from the repository bisected and
check messages from its logs: every one is escaped (``report/blocks.py``).
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..bisection.search import BisectResult, Commit, Outcome, Probe, Purpose, Step
from .blocks import md_code, md_text


def headline(result: BisectResult) -> str:
    """One line: the culprit, or why none could be named."""
    if result.decided and result.culprit is not None:
        c = result.culprit
        return (f"culprit {c.short} \"{c.subject}\" by {c.author} ({c.date}); "
                f"confidence {result.confidence}; {result.builds} build(s)")
    return f"could not decide: {result.why}; {result.builds} build(s)"


def result_json(result: BisectResult, about: Mapping[str, Any]) -> dict[str, Any]:
    return {"schema": 1, **dict(about), "headline": headline(result), **result.to_dict()}


def _facts(result: BisectResult, about: Mapping[str, Any]) -> list[tuple[str, str]]:
    rows = [(k, str(v)) for k, v in about.items() if v not in (None, "")]
    rows += [("commits in range", str(result.commits)),
             ("builds", f"{result.builds} (limit {result.to_dict()['build_limit']}: ⌈log₂N⌉ + 3)"),
             ("build time", f"{result.build_seconds:.0f} s"), ("total time", f"{result.seconds:.0f} s")]
    return rows


def _step_rows(result: BisectResult) -> list[list[str]]:
    return [[str(n), s.commit.short, s.commit.subject, s.purpose.value, s.probe.outcome.value,
             str(s.probe.rounds or ""), f"{s.probe.seconds:.0f} s", "yes" if s.probe.built else "no",
             s.probe.reason]
            for n, s in enumerate(result.steps, start=1)]


STEP_HEADER = ["#", "commit", "subject", "why", "result", "rounds", "time", "built", "reason"]


def markdown(result: BisectResult, about: Mapping[str, Any]) -> str:
    out = ["# bsdkm-ci bisect", ""]
    if result.decided and result.culprit is not None:
        c = result.culprit
        out += [f"**Culprit: {md_code(c.sha)}** {md_text(c.subject)}", "",
                f"- author: {md_text(c.author)}", f"- date: {md_text(c.date)}",
                f"- parent: {md_code(result.parent.sha if result.parent else '-')}",
                f"- confidence: {result.confidence}", f"- evidence: {md_text(result.why)}"]
        change = result.evidence.get("change_pct")
        if change is not None:
            lo, hi = (result.evidence.get("interval_pct") or [None, None])[:2]
            interval = f" (interval {lo} % to {hi} %)" if lo is not None and lo != hi else ""
            metric = result.evidence.get("metric") or "time"
            out.append(f"- change: {change:+.2f} % {md_text(metric)}{interval} in "
                       f"{md_text(result.evidence.get('item'))}")
    else:
        out += ["**Could not decide.**", "", md_text(result.why), "",
                "Commits left: " + (", ".join(md_code(c.short) for c in result.remaining) or "none")]
    out += ["", "| | |", "|---|---|"]
    out += [f"| {md_text(k)} | {md_text(v)} |" for k, v in _facts(result, about)]
    out += ["", "## Steps", "", "| " + " | ".join(STEP_HEADER) + " |",
            "|" + "---|" * len(STEP_HEADER)]
    out += ["| " + " | ".join(md_code(c, in_table=True) if i == 1 else md_text(c) for i, c in enumerate(row))
            + " |" for row in _step_rows(result)]
    verify = result.verification
    if verify:
        out += ["", "## Verification runs", ""]
        out += [f"- {md_code(s.commit.short)}: {s.probe.outcome.value} {md_text(s.probe.reason)}"
                for s in verify]
    return "\n".join(out) + "\n"


def html_page(result: BisectResult, about: Mapping[str, Any]) -> str:
    e = html.escape
    if result.decided and result.culprit is not None:
        c = result.culprit
        top = (f"<p><strong>Culprit: <code>{e(c.sha)}</code></strong> {e(c.subject)}<br>"
               f"author {e(c.author)}, {e(c.date)}; confidence {e(result.confidence)}</p>"
               f"<p>{e(result.why)}</p>")
    else:
        left = ", ".join(f"<code>{e(c.short)}</code>" for c in result.remaining) or "none"
        top = f"<p><strong>Could not decide.</strong> {e(result.why)}</p><p>Commits left: {left}</p>"
    facts = "".join(f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in _facts(result, about))
    head = "".join(f"<th>{e(h)}</th>" for h in STEP_HEADER)
    rows = "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in _step_rows(result))
    return (f"<!doctype html><html><head><meta charset=\"utf-8\"><title>bsdkm-ci bisect</title></head><body>"
            f"<h1>bsdkm-ci bisect</h1>{top}<table>{facts}</table><h2>Steps</h2>"
            f"<table><tr>{head}</tr>{rows}</table></body></html>\n")


ABOUT_KEYS = ("repository", "good", "bad", "target", "variant", "failure", "regression", "pct", "flaky")


def result_from_json(doc: Mapping[str, Any]) -> tuple[BisectResult, dict[str, Any]]:
    """``bisect.json`` back as the result and its ``about``: how the master renders the report itself
    from the data, never showing HTML a worker wrote. ValueError for a document that is not one."""
    try:
        def commit(d: Any) -> Commit | None:
            return Commit.from_dict(d) if isinstance(d, Mapping) else None

        steps = [Step(Commit.from_dict(s["commit"]), int(s.get("index") or 0), Purpose(s["purpose"]),
                      Probe(Outcome(s["outcome"]), str(s.get("reason") or ""), int(s.get("rounds") or 0),
                            float(s.get("seconds") or 0), bool(s.get("built", True)),
                            float(s.get("build_seconds") or 0), extra_builds=int(s.get("extra_builds") or 0)))
                 for s in doc.get("steps") or []]
        result = BisectResult(decided=bool(doc.get("decided")), culprit=commit(doc.get("culprit")),
                              parent=commit(doc.get("parent")), why=str(doc.get("why") or ""),
                              remaining=[c for c in map(commit, doc.get("remaining") or []) if c],
                              confidence=str(doc.get("confidence") or "none"), steps=steps,
                              commits=int(doc.get("commits") or 0),
                              evidence=dict(doc.get("evidence") or {}))
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise ValueError(f"not a bisection result: {type(e).__name__}: {e}") from None
    about = {k: doc[k] for k in ABOUT_KEYS if isinstance(doc.get(k), str | int | float)}
    return result, about


def write_reports(result: BisectResult, about: Mapping[str, Any], out: Path) -> dict[str, Path]:
    """``bisect.json``, ``bisect.md`` and ``bisect.html`` in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "bisect.json", "md": out / "bisect.md", "html": out / "bisect.html"}
    paths["json"].write_text(json.dumps(result_json(result, about), indent=2, default=str))
    paths["md"].write_text(markdown(result, about))
    paths["html"].write_text(html_page(result, about))
    return paths
