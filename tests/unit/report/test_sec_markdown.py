"""PR-controlled names in every Markdown block (notes, paragraphs, headings, tables, the release
report) stay text: no link, no image, no mention, no new line or table row."""

from __future__ import annotations

import re

from buildbot_bsdkm.model import RunResult
from buildbot_bsdkm.policy import Verdict
from buildbot_bsdkm.report.blocks import Block
from buildbot_bsdkm.report.html_page import html_report
from buildbot_bsdkm.report.markdown import delta_report, markdown_report
from buildbot_bsdkm.report.release_report import markdown_release

EVIL = "[click me](https://evil.example/) @wolfssl/security-team <img src=x onerror=alert(1)>"
VARIANT = "[approve here](https://evil.example/) @wolfssl/security"


def unescaped(markdown: str) -> list[str]:
    """Markup an attacker wanted: a link ``](``, an unescaped mention, an HTML tag (code spans,
    which show their content literally, left out)."""
    markdown = re.sub(r"(`+)(?!`).*?(?<!`)\1(?!`)", "", markdown)
    found = re.findall(r"(?<!\\)\]\(", markdown)
    found += re.findall(r"(?<!\w)\\?@wolfssl", markdown)  # GitHub links even \@name: a backslash is no escape
    found += re.findall(r"(?<!\\)<img", markdown)
    return found


def rendered_markup(markdown: str) -> list[str]:
    """Links, images and raw HTML a CommonMark renderer (with tables) makes of ``markdown``."""
    from markdown_it import MarkdownIt

    html = MarkdownIt("commonmark").enable("table").render(markdown)
    return re.findall(r"<(?:a|img|script)\b[^>]*>", html)


def perf_entry(name: str) -> dict:
    item = {"name": name, "change": -0.01, "ci_low": None, "ci_high": None, "limit": None,
            "min_detectable": None, "n_base": 5, "n_head": 5, "verdict": "inconclusive",
            "reason": "too noisy", "mis_timed": True}
    return {"target": "userspace", "variant": VARIANT, "verdict": "inconclusive", "family": "throughput",
            "alpha": 0.05, "base_from": "history", "items": [item], "geomean": None}


def test_notes_and_paragraphs_with_pr_names_are_escaped() -> None:
    verdict = Verdict(notes=[f"userspace/intelasm: {EVIL} is mis-timed: gated on cycles"],
                      perf=[perf_entry(EVIL)])
    runs = [RunResult(VARIANT, "userspace", metadata={"source": f"git:{EVIL}@main"})]
    for text in (markdown_report(runs, verdict), delta_report(verdict)):
        assert "mis-timed" in text and "Inconclusive (not judged, not passed)" in text
        assert unescaped(text) == [], text
        assert rendered_markup(text) == []  # rendered, the names are text: no link, image or tag
    html = html_report(runs, verdict)
    assert "<img" not in html and "&lt;img" in html


def test_a_newline_or_list_marker_in_a_name_starts_nothing() -> None:
    from buildbot_bsdkm.report.blocks import md_paragraph

    text = md_paragraph("- item\n\n# heading\n| a | b |")
    assert "\n" not in text and text.startswith("\\-") and "\\#" in text and "\\|" in text
    assert md_paragraph("1. first") == "1\\. first"


def test_code_spans_stay_literal_whatever_they_hold() -> None:
    from buildbot_bsdkm.report.blocks import code, md_paragraph

    out = md_paragraph("Source: " + code("git:x`y@main"))
    assert out == "Source: ``git:x`y@main``"
    # Marks smuggled into a name only choose a code span: its content is still literal.
    assert unescaped(md_paragraph(f"\ue000{EVIL}\ue001 then {EVIL}")) == []


def test_blocks_added_by_other_report_sections_are_escaped_too() -> None:
    from buildbot_bsdkm.report.markdown import _md_block

    for kind in ("p", "note", "h3", "anything-new"):
        assert unescaped(_md_block(Block(kind, EVIL))) == []


def test_release_report_escapes_names() -> None:
    doc = {
        "verdict": {"passed": False, "summary": f"FAIL: {EVIL}", "failures": [EVIL], "notes": [EVIL]},
        "sources": {side: {"source": f"git:{EVIL}", "tree": {"version": "5.9.2"}}
                    for side in ("candidate", "previous")},
        "repeats": 3, "matrix": [{"label": f"userspace/{VARIANT}", "status": "ok", "candidate": "ok",
                                   "previous": "ok"}],
        "changes": [{"item": f"userspace/{VARIANT}", "name": EVIL, "previous": 1.0, "candidate": 0.9,
                     "unit": "MiB/s", "delta_pct": -10.0, "limit_pct": 5.0, "passed": False,
                     "verdict": "regression"}],
        "software_variant": VARIANT,
        "speedups": [{"target": "userspace", "variant": VARIANT, "name": EVIL, "previous": 2.0,
                      "candidate": 2.1}],
    }
    text = markdown_release(doc)
    assert unescaped(text) == [], text
    assert rendered_markup(text) == []


def test_mentions_and_issue_references_are_broken_for_github() -> None:
    from buildbot_bsdkm.report.blocks import ZWSP, md_paragraph

    # GitHub turns @name and #123 into pings and links after rendering, backslash or not.
    out = md_paragraph("@wolfssl/security-team, see #123; kmod@14.3 and a@b.c stay as written")
    assert out.startswith(f"@{ZWSP}wolfssl/security-team") and f"\\#{ZWSP}123" in out
    assert "kmod@14.3" in out and "a@b.c" in out
