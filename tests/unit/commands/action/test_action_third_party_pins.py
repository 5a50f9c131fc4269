"""Every third-party action is pinned to the commit its tag names, as recorded in docs/security.md.

The table there was read from the upstream repositories' own tags; this test cannot reach them, so
it holds the workflows to the record: a ``uses:`` outside ``actions/*`` and this project names a
40-digit commit, its comment names the tag, and (action, tag, commit) is a row of the table. A pin
moved without reading the upstream tag again (and recording it) fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
OWN = "wolfSSL/bsdkm-ci/"
ROW = re.compile(r"^\| `([\w.-]+/[\w.-]+)` \| `([^`]+)` \| `([0-9a-f]{40})` \|$")
USES = re.compile(r"^\s*(?:-\s*)?uses:\s*(\S+)(?:\s*#\s*(\S+))?")


def recorded() -> set[tuple[str, str, str]]:
    text = (ROOT / "docs" / "security.md").read_text()
    section = text.split("## Pinned third-party actions", 1)[1].split("\n## ", 1)[0]
    return {m.groups() for line in section.splitlines() if (m := ROW.match(line.strip()))}


def third_party_uses() -> list[tuple[str, str, str | None]]:
    files = [ROOT / "action" / "action.yml", *sorted((ROOT / "action" / "examples").glob("*.yml")),
             *sorted((ROOT / ".github" / "workflows").glob("*.yml"))]
    found = []
    for path in files:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            m = USES.match(line)
            if m and not m.group(1).startswith(("actions/", OWN, "./")):
                found.append((f"{path.relative_to(ROOT)}:{n}", m.group(1), m.group(2)))
    return found


def test_every_third_party_pin_is_the_commit_its_tag_names() -> None:
    table = recorded()
    assert len(table) >= 2, "docs/security.md lost its table of pinned actions"
    uses = third_party_uses()
    assert uses, "no third-party action found: the scan is broken"
    for where, ref, tag in uses:
        action, _, commit = ref.partition("@")
        assert re.fullmatch(r"[0-9a-f]{40}", commit), f"{where}: {ref} is not pinned by commit"
        assert tag is not None, f"{where}: {ref} names no tag in a comment"
        assert (action, tag, commit) in table, f"{where}: {action} {tag} = {commit} is not what was recorded"
    used = {(ref.partition("@")[0], tag, ref.partition("@")[2]) for _, ref, tag in uses}
    assert table <= used, f"recorded but no longer used: {sorted(table - used)}"
