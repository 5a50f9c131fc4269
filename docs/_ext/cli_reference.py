"""The CLI reference as Markdown, drawn from the argparse parsers themselves.

Every subcommand, argument, choice and default shown is read from ``buildbot_bsdkm.cli.build_parser()``;
``scripts/reference_docs.py`` writes it into ``docs/cli.md`` (so it reads the same on GitHub and on the
docs site), and the suite checks that the page is what the parsers say today.
"""

from __future__ import annotations

import argparse
import os
import textwrap
from collections.abc import Iterator

# argparse wraps usage to the terminal: a fixed width keeps the page the same everywhere.
USAGE_COLUMNS = "78"


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


def _then(text: str, more: str) -> str:
    """``more`` as a sentence after ``text``."""
    if not text:
        return more
    return (text if text[-1] in ".!?" else text + ".") + " " + more


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
            text = _then(text, "One of: " + ", ".join(map(str, action.choices)) + ".")
        if action.required and action.option_strings:
            text = _then(text, "Required.")
        rows.append((name, text))
    return rows


def _code(text: str) -> str:
    fence = "``" if "`" in text else "`"
    pad = " " if fence == "``" else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _inline(text: str) -> str:
    """Docstring-style ``code`` as Markdown code; text that Markdown would read as markup is escaped."""
    parts = text.split("``")
    out = []
    for i, part in enumerate(parts):
        if i % 2:
            out.append(_code(part))
        else:
            out.append(part.replace("*", "\\*").replace("_", "\\_").replace("<", "&lt;"))
    return "".join(out)


# Prose lines of the page stay this short, so its Markdown reads as well as its rendering.
WIDTH = 110


def _wrap(text: str, first: str = "", rest: str = "") -> str:
    return textwrap.fill(text, WIDTH, initial_indent=first, subsequent_indent=rest, break_long_words=False,
                         break_on_hyphens=False)


def _block(lines: list[str]) -> str:
    return "```text\n" + "\n".join(lines) + "\n```"


def _prose(text: str) -> list[str]:
    """A help text as --help shows it: indented lines are examples (a code block), the rest paragraphs."""
    out: list[str] = []
    for para in textwrap.dedent(text).strip().split("\n\n"):
        prose: list[str] = []
        example: list[str] = []
        for line in para.splitlines() + [""]:
            if line.startswith("    "):
                if prose:
                    out.append(_wrap(_inline(" ".join(" ".join(prose).split()))))
                    prose = []
                example.append(line[4:])
                continue
            if example:
                out.append(_block(example))
                example = []
            if line.strip():
                prose.append(line)
        if prose:
            out.append(_wrap(_inline(" ".join(" ".join(prose).split()))))
    return out


def _section(title: str, summary: str, parser: argparse.ArgumentParser, level: int) -> list[str]:
    out = [f"{'#' * level} {title}"]
    if summary:
        first = summary.split(" ", 1)[0]
        # A sentence starts with a capital, unless it starts with a name (master.cfg, bsdkm.yml).
        out.append(_wrap(_inline((summary if "." in first else summary[:1].upper() + summary[1:]) + ".")))
    out.append(_block([parser.format_usage().strip()]))
    if parser.description:
        out.extend(_prose(parser.description))
    rows = _argument_rows(parser)
    if rows:
        out.append("\n".join(_wrap(f"{_code(name)}: {_inline(text) if text else '—'}", "- ", "  ")
                             for name, text in rows))
    if parser.epilog:
        out.extend(_prose(parser.epilog))
    for name, sub_summary, sub in subcommands(parser):
        out.extend(_section(f"{title} {name}", sub_summary, sub, level + 1))
    return out


def markdown(top: argparse.ArgumentParser, level: int = 2) -> str:
    """The whole reference: the top usage, then a section per subcommand (headings from ``level``)."""
    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = USAGE_COLUMNS
    try:
        out = [_block([top.format_usage().strip()])]
        for name, summary, sub in subcommands(top):
            out.extend(_section(f"{top.prog} {name}", summary, sub, level))
        return "\n\n".join(out)
    finally:
        if saved is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = saved
