#!/usr/bin/env python3
"""Write (``--write``) or check the generated parts of the reference pages.

Each part sits between two comment lines in plain Markdown, so GitHub and the docs site show the same
text: the Action's inputs and outputs (from ``action/action.yml``) in ``action/README.md`` and
``docs/action.md``, the example workflows in full in ``docs/action.md``, and the CLI reference (from the
argparse parsers) in ``docs/cli.md``. Without ``--write`` it prints the parts that are out of date and
exits 1; ``tests/unit/test_reference_docs.py`` runs the same check.
"""

from __future__ import annotations

import difflib
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "docs" / "_ext"), str(ROOT)]

import action_reference  # noqa: E402
import cli_reference  # noqa: E402

# The order docs/action.md describes the examples in; a new example goes after these.
EXAMPLE_ORDER = ["bsdkm-pr.yml", "bsdkm-pr-fork.yml", "bsdkm-retest.yml", "bsdkm-nightly.yml",
                 "bsdkm-release.yml", "bsdkm-bisect.yml"]


def begin(name: str) -> str:
    return f"<!-- generated: {name}; written by scripts/reference_docs.py --write, do not edit by hand -->"


def end(name: str) -> str:
    return f"<!-- end of generated: {name} -->"


@dataclass(frozen=True)
class Part:
    page: Path
    name: str
    make: Callable[[], str]


def _cli() -> str:
    from buildbot_bsdkm.cli import build_parser

    return cli_reference.markdown(build_parser())


def parts() -> list[Part]:
    action = action_reference.load_action()
    inputs = action_reference.inputs_table(action)
    outputs = action_reference.outputs_table(action)
    readme, page, cli = ROOT / "action" / "README.md", ROOT / "docs" / "action.md", ROOT / "docs" / "cli.md"
    return [
        Part(readme, "action inputs", lambda: inputs),
        Part(readme, "action outputs", lambda: outputs),
        Part(page, "action inputs", lambda: inputs),
        Part(page, "action outputs", lambda: outputs),
        Part(page, "example workflows", lambda: action_reference.examples_in_full(EXAMPLE_ORDER)),
        Part(cli, "cli reference", _cli),
    ]


def current(text: str, name: str, page: Path) -> tuple[int, int]:
    """Where the part's body is in the page's text: (start, end) between its two comment lines."""
    head, tail = begin(name), end(name)
    if text.count(head) != 1 or text.count(tail) != 1:
        raise ValueError(f"{page.relative_to(ROOT)}: needs exactly one '{head}' and one '{tail}' line")
    start = text.index(head) + len(head)
    return start, text.index(tail, start)


def render(body: str) -> str:
    return f"\n\n{body.strip()}\n\n"


def stale() -> list[tuple[Part, str, str]]:
    """(part, what the page has, what it should have) of every part that is out of date."""
    out = []
    for part in parts():
        text = part.page.read_text(encoding="utf-8")
        start, stop = current(text, part.name, part.page)
        want = render(part.make())
        if text[start:stop] != want:
            out.append((part, text[start:stop], want))
    return out


def write() -> list[Path]:
    written = []
    for part in parts():
        text = part.page.read_text(encoding="utf-8")
        start, stop = current(text, part.name, part.page)
        new = text[:start] + render(part.make()) + text[stop:]
        if new != text:
            part.page.write_text(new, encoding="utf-8")
            written.append(part.page)
    return written


def main(argv: list[str]) -> int:
    if "--write" in argv:
        for page in dict.fromkeys(write()):
            print(f"wrote {page.relative_to(ROOT)}")
        return 0
    problems = stale()
    for part, have, want in problems:
        where = f"{part.page.relative_to(ROOT)} ({part.name})"
        diff = difflib.unified_diff(have.splitlines(True), want.splitlines(True), where, "generated")
        sys.stdout.writelines(diff)
    if problems:
        print("out of date: run python scripts/reference_docs.py --write", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
