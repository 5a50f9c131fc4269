"""The package's docstrings and comments speak to users: no tracker issue numbers ("issue 9")."""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "buildbot_bsdkm"
ISSUE = re.compile(r"\b[Ii]ssues? #?\d+")


def test_no_docstring_or_comment_names_an_issue_number() -> None:
    found = [f"{f.relative_to(PACKAGE)}:{n}" for f in sorted(PACKAGE.rglob("*.py"))
             for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), start=1)
             if ISSUE.search(line)]
    assert found == []
