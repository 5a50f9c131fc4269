"""The pieces a report is built of (headings, paragraphs, tables), shared by ``report/verdict.py`` and the
modules that add sections to it (``report/offload_paths.py``), so neither imports the other for them.

A block's text is plain text: the renderers escape all of it (Markdown and HTML alike), since
names in it come from PR-controlled logs and results. Inline code is the one markup a block
may carry, marked with ``code(text)``; its content is literal too.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

# Row priorities: rows with a higher number are dropped first when trimming.
KEEP = 0
SELFTEST_ROW = 1
COMPARISON_ROW = 2
BENCHMARK_ROW = 3


@dataclass
class Row:
    cells: list[str]
    priority: int = KEEP
    weight: float = 0.0  # within a priority, rows with less weight go first


@dataclass
class Table:
    header: list[str]
    rows: list[Row] = field(default_factory=list)
    omitted: int = 0

    def shown(self) -> tuple[list[str], list[list[str]]]:
        """Header and rows as rendered: a column empty in every row is left out (no baseline, no
        limit: nothing to read there). A table without rows keeps its header."""
        if not self.rows:
            return list(self.header), []
        keep = [i for i in range(len(self.header)) if any(r.cells[i].strip() for r in self.rows)]
        return [self.header[i] for i in keep], [[r.cells[i] for i in keep] for r in self.rows]


# Private-use characters around inline code. They only choose how a span is shown: text inside
# them is as literal as text outside (a code span), so a name that carries them gains nothing.
_CODE_OPEN, _CODE_CLOSE = "\ue000", "\ue001"
_SPANS = re.compile(f"{_CODE_OPEN}([^{_CODE_OPEN}{_CODE_CLOSE}]*){_CODE_CLOSE}")
_MARKS = re.compile(f"[{_CODE_OPEN}{_CODE_CLOSE}]")

# Characters that start Markdown syntax (links, images, emphasis, HTML, code, headings, tables,
# strike-through, entities). Names come from logs and PR branches: a variant called
# "[x](https://evil)" or "@org/team" must show as text, never become a link, a ping or a new row.
_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>#|~&])")
# GitHub links @user/@org/team and #123 after rendering, so a backslash does not stop them (it is
# consumed first): a zero-width space after the sign does, and the text still reads the same. A
# backtick before the sign is no exception: escaped, it renders as a plain character.
_MENTION = re.compile(r"(?<![0-9A-Za-z_])@(?=[0-9A-Za-z_-])")
_ISSUE_REF = re.compile(r"#(?=\d)")
# GitHub also makes a bare URL a link (the autolink extension: a scheme's "://", or "www."), which
# no escaping stops either; the same zero-width space inside breaks it.
_AUTOLINK = re.compile(r"(?<=:)(?=//)|(?<=www)(?=\.)", re.I)
ZWSP = "\u200b"
_LINE_START = re.compile(r"^(\d*)([-+=.)])")  # a list item or a setext underline at a line's start


def code(text: object) -> str:
    """``text`` as inline code in a block's text."""
    return f"{_CODE_OPEN}{_MARKS.sub('', str(text))}{_CODE_CLOSE}"


def plain(text: object) -> str:
    """A block's text without its code marks (for the console, JUnit, JSON)."""
    return _MARKS.sub("", str(text))


def _one_line(text: object) -> str:
    return re.sub(r"\s+", " ", str(text))


def unlinked(text: str) -> str:
    """``text`` with @mentions, #references and bare URLs broken by a zero-width space (for HTML
    GitHub shows too)."""
    return _AUTOLINK.sub(ZWSP, _ISSUE_REF.sub(f"#{ZWSP}", _MENTION.sub(f"@{ZWSP}", text)))


def _escape(text: str) -> str:
    return _MD_SPECIAL.sub(r"\\\1", unlinked(text))


def md_text(text: object) -> str:
    """Untrusted text as literal inline Markdown on one line."""
    return _escape(_one_line(plain(text)).strip())


def md_code(text: object, *, in_table: bool = False) -> str:
    """Inline code whose content stays literal, whatever backticks it holds."""
    body = _one_line(plain(text)).strip()
    if not body:
        return ""
    fence = "`" * (max((len(run) for run in re.findall(r"`+", body)), default=0) + 1)
    pad = " " if body[0] == "`" or body[-1] == "`" else ""
    if in_table:  # a table row is split on | before code spans are read
        body = body.replace("|", "\\|")
    return f"{fence}{pad}{body}{pad}{fence}"


def md_inline(text: object, *, in_table: bool = False) -> str:
    """A block's text as Markdown: code spans fenced, everything else escaped."""
    text, out, at = _one_line(text).strip(), [], 0
    for m in _SPANS.finditer(text):
        out += [_escape(plain(text[at:m.start()])), md_code(m[1], in_table=in_table)]
        at = m.end()
    out.append(_escape(plain(text[at:])))
    return "".join(out)


def md_paragraph(text: object) -> str:
    """``md_inline`` for text that begins a line: a leading ``-``, ``+``, ``=`` or ``1.`` stays text."""
    return _LINE_START.sub(r"\1\\\2", md_inline(text), count=1)


def md_url(url: object) -> str:
    """A link target that cannot end the link early or carry markup."""
    return re.sub(r"[\s()<>\[\]`\\\"']", lambda m: f"%{ord(m[0]):02X}", plain(url))


def html_inline(text: object) -> str:
    """A block's text as HTML: code spans in ``<code>``, everything escaped."""
    text, out, at = str(text), [], 0
    for m in _SPANS.finditer(text):
        out += [html.escape(plain(text[at:m.start()])), f"<code>{html.escape(m[1])}</code>"]
        at = m.end()
    out.append(html.escape(plain(text[at:])))
    return "".join(out)


@dataclass
class Block:
    kind: str  # "h2", "h3", "p", "note", "table"
    text: str = ""
    table: Table | None = None
