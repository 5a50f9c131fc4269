"""``--help`` of every subcommand is plain text: no reStructuredText markup from the docstrings."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from buildbot_bsdkm.cli import build_parser


def parsers(p: argparse.ArgumentParser,
            name: str = "bsdkm-ci") -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield name, p
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub, child in action.choices.items():
                yield from parsers(child, f"{name} {sub}")


def test_no_subcommand_help_shows_rst_markup() -> None:
    found = list(parsers(build_parser()))
    assert len(found) > 20  # every subcommand, the action's included
    marked = [name for name, p in found if "``" in p.format_help()]
    assert marked == []
