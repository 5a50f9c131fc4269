"""The triage sections of a report (Markdown/HTML, the PR comment): New, Pre-existing, Known
issues, Flaky, Fixed. Plain text blocks (``report/blocks.py``): the renderers escape every cell, since
signatures and messages come from PR-controlled logs."""

from __future__ import annotations

from typing import Any

from ..triage.policy_section import FLAKY, KNOWN, NEW, PRE_EXISTING
from .blocks import KEEP, Block, Row, Table

HEADINGS = {NEW: "Failures: New", PRE_EXISTING: "Failures: Pre-existing", KNOWN: "Known issues",
            FLAKY: "Failures: Flaky"}
FIXED_HEADING = "Fixed by this change"
# With no base branch outcome to compare with, nothing can be called new: the failures that are
# neither known nor flaky are listed under this heading instead.
NO_BASE_HEADING = "Failures (no base to compare with)"
NO_BASE_WORD = "with no base to compare with"


def compared_with_a_base(verdict: Any) -> bool:
    """Whether the triage had base-branch outcomes to call a failure new or pre-existing by."""
    return bool((getattr(verdict, "triage", None) or {}).get("base_outcomes"))


def _blocks_word(c: Any) -> str:
    return "FAIL" if c.blocking else "no (policy: warn)"


def counts_line(verdict: Any) -> str | None:
    """'Triage: 1 new, 2 known, 1 fixed' (None when nothing failed and nothing was fixed)."""
    words: dict[str, int] = {}
    for c in verdict.failures:
        words[c.triage or NEW] = words.get(c.triage or NEW, 0) + 1
    fixed = len((getattr(verdict, "triage", None) or {}).get("fixed") or [])
    shown = {NEW: NEW if compared_with_a_base(verdict) else NO_BASE_WORD}
    parts = [f"{n} {shown.get(w, w)}" for w in (NEW, PRE_EXISTING, KNOWN, FLAKY) if (n := words.get(w))]
    if fixed:
        parts.append(f"{fixed} fixed")
    return "Triage: " + ", ".join(parts) if parts else None


def triage_blocks(verdict: Any) -> list[Block]:
    """Every failed check under its triage word's heading, then what this change fixed."""
    by: dict[str, list[Any]] = {}
    for c in verdict.failures:
        by.setdefault(c.triage or NEW, []).append(c)
    blocks: list[Block] = []
    line = counts_line(verdict)
    if line and (set(by) - {NEW} or (verdict.triage or {}).get("fixed")):
        blocks.append(Block("p", line))
    if by.get(NEW):
        t = Table(["run", "kind", "check", "what happened", "signature"])
        for c in by[NEW]:
            t.rows.append(Row([c.run_label, c.kind + (" (error)" if c.error else ""), c.name, c.message,
                               c.signature or ""], KEEP))
        heading = HEADINGS[NEW] if compared_with_a_base(verdict) else NO_BASE_HEADING
        blocks += [Block("h3", heading), Block("table", table=t)]
    if by.get(PRE_EXISTING):
        t = Table(["run", "check", "signature", "on the base", "fails"])
        for c in by[PRE_EXISTING]:
            t.rows.append(Row([c.run_label, c.name, c.signature or "", c.triage_note or "", _blocks_word(c)]))
        blocks += [Block("h3", HEADINGS[PRE_EXISTING]), Block("table", table=t)]
    if by.get(KNOWN):
        blocks += _known_blocks(by[KNOWN], verdict)
    if by.get(FLAKY):
        t = Table(["run", "check", "signature", "why", "fails"])
        for c in by[FLAKY]:
            t.rows.append(Row([c.run_label, c.name, c.signature or "", c.triage_note or "", _blocks_word(c)]))
        blocks += [Block("h3", HEADINGS[FLAKY]), Block("table", table=t)]
    fixed = (verdict.triage or {}).get("fixed") or []
    if fixed:
        t = Table(["run", "signature", "failed on the base since"])
        for f in fixed:
            t.rows.append(Row([str(f.get("label", "")), str(f.get("signature", "")),
                               str(f.get("since", ""))]))
        blocks += [Block("h3", FIXED_HEADING), Block("table", table=t)]
    return blocks


def _known_blocks(checks: list[Any], verdict: Any) -> list[Block]:
    entries = {e["id"]: e for e in (verdict.triage or {}).get("known_issues") or [] if isinstance(e, dict)}
    t = Table(["run", "check", "signature", "known issue", "reason", "fails"])
    links: dict[str, str] = {}
    for c in checks:
        ident = str((c.detail or {}).get("known_issue") or "")
        entry = entries.get(ident, {})
        url = str((c.detail or {}).get("known_url") or entry.get("url") or "")
        if ident and url:
            links[ident] = url
        reason = str(entry.get("reason") or c.triage_note or "")
        until = f" (until {entry['until']})" if entry.get("until") else ""
        t.rows.append(Row([c.run_label, c.name, c.signature or "", ident, reason + until, _blocks_word(c)]))
    out = [Block("h3", HEADINGS[KNOWN]), Block("table", table=t)]
    if links:
        out.append(Block("links", table=Table(list(links), [Row(list(links.values()))])))
    return out
