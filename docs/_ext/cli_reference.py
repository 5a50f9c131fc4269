"""The ``bsdkm-cli`` directive: the CLI reference drawn from the argparse parsers themselves.

The page cannot drift from the command: every subcommand, argument, choice and default shown is
read from ``buildbot_bsdkm.cli.build_parser()`` at build time.
"""

from __future__ import annotations

import argparse
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


def _argument_rows(parser: argparse.ArgumentParser) -> list[tuple[str, str]]:
    rows = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        if action.help == argparse.SUPPRESS:
            continue
        if action.option_strings:
            metavar = ""
            if action.nargs != 0:
                metavar = " " + (parser._get_formatter()._format_args(action, action.dest.upper()))
            name = ", ".join(action.option_strings) + metavar
        else:
            name = parser._get_formatter()._format_args(action, action.dest)
        text = _help_text(parser, action)
        if action.choices and not isinstance(action.choices, dict):
            text = (text + " " if text else "") + "One of: " + ", ".join(map(str, action.choices)) + "."
        if action.required and action.option_strings:
            text = (text + " " if text else "") + "Required."
        rows.append((name, text))
    return rows


class CliReference(Directive):
    has_content = False

    def run(self) -> list[nodes.Node]:
        from buildbot_bsdkm.cli import build_parser

        top = build_parser()
        out: list[nodes.Node] = [nodes.literal_block(text=top.format_usage().strip())]
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
        section += nodes.literal_block(text=parser.format_usage().strip())
        if parser.description:
            for para in parser.description.strip().split("\n\n"):
                if para.startswith("    "):
                    section += nodes.literal_block(text="\n".join(s[4:] for s in para.splitlines()))
                else:
                    section += nodes.paragraph(text=" ".join(para.split()))
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
            section += nodes.paragraph(text=" ".join(parser.epilog.split()))
        for name, sub_summary, sub in subcommands(parser):
            section += self._section(f"{title} {name}", sub_summary, sub)
        return section


def setup(app: Sphinx) -> dict[str, object]:
    app.add_directive("bsdkm-cli", CliReference)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
