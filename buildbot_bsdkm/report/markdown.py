"""A verdict's report as Markdown (the PR comment, the GitHub job summary), at most a size.

GitHub caps a comment / job summary at 65536 characters, so the renderer drops the least important
table rows first (passing items with the smallest change), never a failure, and says how many rows
it left out. The content is ``report/verdict.py``'s blocks.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

from ..model import RunResult
from ..policy import Verdict
from .blocks import KEEP, Block, md_inline, md_paragraph, md_url, plain, unlinked
from .verdict import delta_blocks, report_blocks

DEFAULT_MAX_CHARS = 65536


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


def delta_report(verdict: Verdict, *, max_chars: int = DEFAULT_MAX_CHARS) -> str:
    """Markdown of a baseline comparison: verdict, failures, and every item's delta."""
    blocks = delta_blocks(verdict)
    dropped = _trim(blocks, max_chars)
    text = "".join(_md_block(b) for b in blocks)
    if dropped:
        text += f"_Trimmed to {max_chars} characters: {dropped} passing row(s) left out._\n"
    return text
