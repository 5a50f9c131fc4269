#!/usr/bin/env python3
"""Check that a release tag can be cut, or print its notes.

    python scripts/release_check.py v1.2.3           # exit 0, or 2 naming what is missing
    python scripts/release_check.py v1.2.3 --notes   # the CHANGELOG.md entry of 1.2.3

A tag ``vX.Y.Z`` is releasable when ``pyproject.toml``'s version is ``X.Y.Z`` and ``CHANGELOG.md`` has a
dated entry ``## [X.Y.Z] - YYYY-MM-DD`` (Keep a Changelog). The release workflow
(``.github/workflows/release.yml``) runs this before it builds anything.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TAG = re.compile(r"v(?P<version>\d+\.\d+\.\d+)")


class NotReleasable(Exception):
    pass


def version_of(tag: str) -> str:
    m = TAG.fullmatch(tag)
    if not m:
        raise NotReleasable(f"tag {tag!r} is not vMAJOR.MINOR.PATCH (e.g. v1.2.3)")
    return m["version"]


def changelog_entry(changelog: str, version: str) -> str:
    """The text under ``## [version] - date`` up to the next release heading."""
    heading = re.search(rf"^## \[{re.escape(version)}\](?: - (?P<date>.*))?$", changelog, re.M)
    if heading is None:
        raise NotReleasable(f"CHANGELOG.md has no '## [{version}] - YYYY-MM-DD' entry")
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", (heading["date"] or "").strip()):
        raise NotReleasable(f"CHANGELOG.md's entry for {version} is not dated "
                            f"({heading.group(0)!r}; write '## [{version}] - YYYY-MM-DD')")
    rest = changelog[heading.end():]
    following = re.search(r"^## \[", rest, re.M)
    return (rest[: following.start()] if following else rest).strip()


def check(tag: str, root: Path = ROOT) -> str:
    """The release's notes, when ``tag`` can be released from ``root``."""
    version = version_of(tag)
    declared = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    if declared != version:
        raise NotReleasable(f"tag {tag} but pyproject.toml's version is {declared}")
    return changelog_entry((root / "CHANGELOG.md").read_text(encoding="utf-8"), version)


def main(argv: list[str]) -> int:
    args = [a for a in argv if not a.startswith("--")]
    if len(args) != 1:
        print("usage: release_check.py vX.Y.Z [--notes]", file=sys.stderr)
        return 2
    try:
        notes = check(args[0])
    except NotReleasable as e:
        print(f"release_check: {e}", file=sys.stderr)
        return 2
    if "--notes" in argv:
        print(notes)
    else:
        print(f"release_check: {args[0]} is releasable")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
