"""The ``bsdkm-cli`` directive: the CLI reference drawn from the argparse parsers themselves.

The page cannot drift from the command: every subcommand, argument, choice and default shown is
read from ``buildbot_bsdkm.cli.build_parser()`` at build time.
"""

from __future__ import annotations

import argparse
import os
import textwrap
from collections.abc import Iterator

from docutils import nodes
from docutils.parsers.rst import Directive
from sphinx.application import Sphinx


def subcommands(parser: argparse.ArgumentParser) -> Iterator[tuple[str, str, argparse.ArgumentParser]]:
    """(name, one-line help, parser) of each subcommand, in the order ``--help`` lists them."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                yield name, helps.get(name, ""), sub


def _help_text(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    if not action.help or action.help == argparse.SUPPRESS:
        return ""
    # The formatter expands %(default)s and friends exactly as --help does.
    return parser._get_formatter()._expand_help(action)


def _sentence(text: str) -> str:
    text = text.strip()
    return text if not text or text[-1] in ".!?)" else text + "."


def _argument_rows(parser: argparse.ArgumentParser) -> list[tuple[str, str]]:
    rows = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        if action.help == argparse.SUPPRESS:
            continue
        # Choices are listed in the text, so the term stays short (argparse would print {a,b,c}).
        shown = action
        if action.choices and action.metavar is None:
            shown = argparse.Action(action.option_strings, action.dest, nargs=action.nargs,
                                    metavar=action.dest.upper() if action.option_strings else action.dest)
        if action.option_strings:
            metavar = ""
            if action.nargs != 0:
                metavar = " " + (parser._get_formatter()._format_args(shown, action.dest.upper()))
            name = ", ".join(action.option_strings) + metavar
        else:
            name = parser._get_formatter()._format_args(shown, action.dest)
        text = _sentence(_help_text(parser, action))
        if action.choices and not isinstance(action.choices, dict):
            text = (text + " " if text else "") + "One of: " + ", ".join(map(str, action.choices)) + "."
        if action.required and action.option_strings:
            text = (text + " " if text else "") + "Required."
        rows.append((name, text))
    return rows


def _literal(text: str) -> nodes.literal_block:
    block = nodes.literal_block(text=text)
    block["language"] = "text"  # usage lines are not Python: no lexer warnings
    return block


def _inline(text: str) -> list[nodes.Node]:
    """Docstring-style ``code`` as literals, the rest as text."""
    parts = text.split("``")
    return [nodes.literal(text=p) if i % 2 else nodes.Text(p) for i, p in enumerate(parts) if p]


def _prose(text: str) -> list[nodes.Node]:
    """A help text as --help shows it: indented lines are examples (literal), the rest paragraphs."""
    out: list[nodes.Node] = []
    for para in textwrap.dedent(text).strip().split("\n\n"):
        prose: list[str] = []
        example: list[str] = []
        for line in para.splitlines() + [""]:
            if line.startswith("    "):
                if prose:
                    out.append(nodes.paragraph("", "", *_inline(" ".join(" ".join(prose).split()))))
                    prose = []
                example.append(line[4:])
                continue
            if example:
                out.append(_literal("\n".join(example)))
                example = []
            if line.strip():
                prose.append(line)
        if prose:
            out.append(nodes.paragraph("", "", *_inline(" ".join(" ".join(prose).split()))))
    return out


class CliReference(Directive):
    has_content = False

    def run(self) -> list[nodes.Node]:
        from buildbot_bsdkm.cli import build_parser

        # argparse wraps usage to the terminal: a fixed width keeps the page the same everywhere.
        saved = os.environ.get("COLUMNS")
        os.environ["COLUMNS"] = "78"
        try:
            return self._build(build_parser())
        finally:
            if saved is None:
                del os.environ["COLUMNS"]
            else:
                os.environ["COLUMNS"] = saved

    def _build(self, top: argparse.ArgumentParser) -> list[nodes.Node]:
        out: list[nodes.Node] = [_literal(top.format_usage().strip())]
        for name, summary, sub in subcommands(top):
            out.append(self._section(f"{top.prog} {name}", summary, sub))
        return out

    def _section(self, title: str, summary: str, parser: argparse.ArgumentParser) -> nodes.section:
        # An explicit target, so other pages can {ref}`bsdkm-ci-run` a subcommand's section.
        label = nodes.make_id(title)
        section = nodes.section(ids=[label], names=[label])
        self.state.document.note_explicit_target(section, section)
        section += nodes.title(text=title)
        if summary:
            section += nodes.paragraph(text=summary[:1].upper() + summary[1:] + ".")
        section += _literal(parser.format_usage().strip())
        if parser.description:
            section.extend(_prose(parser.description))
        rows = _argument_rows(parser)
        if rows:
            dl = nodes.definition_list()
            for name, text in rows:
                item = nodes.definition_list_item()
                item += nodes.term("", "", nodes.literal(text=name))
                item += nodes.definition("", nodes.paragraph(text=text or "—"))
                dl += item
            section += dl
        if parser.epilog:
            section.extend(_prose(parser.epilog))
        for name, sub_summary, sub in subcommands(parser):
            section += self._section(f"{title} {name}", sub_summary, sub)
        return section


def setup(app: Sphinx) -> dict[str, object]:
    app.add_directive("bsdkm-cli", CliReference)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
