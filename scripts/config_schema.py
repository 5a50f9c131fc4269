#!/usr/bin/env python3
"""Print the JSON Schema of ``bsdkm.yml`` (``buildbot_bsdkm/config/json_schema.py``), as shipped.

The keys and their values come from the loader's tables; the keys of ``github:`` and ``www:`` from
the registries their shells check against; each key's words from ``docs/configuration.md``.
``python scripts/config_schema.py --write`` writes ``bsdkm.schema.json``;
``tests/unit/config/test_json_schema.py`` checks the file holds what this prints.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from buildbot_bsdkm.buildbot import www_security  # noqa: E402 - after the path
from buildbot_bsdkm.config.json_schema import SCHEMA_FILE, config_schema  # noqa: E402
from buildbot_bsdkm.github import settings  # noqa: E402

PAGE = ROOT / "docs" / "configuration.md"
OUT = ROOT / SCHEMA_FILE
_TERM = re.compile(r"^`([^`\s]+)`\s*$")


def plain(text: str) -> str:
    """A reference entry's Markdown as an editor's tooltip shows it: links as their words."""
    return re.sub(r"\[([^\]]+)\]\([^)]+\)", r"\1", " ".join(text.split()))


def descriptions(page: str) -> dict[str, str]:
    """Each documented key (a definition-list term) and its text."""
    lines = page.splitlines()
    out: dict[str, str] = {}
    for i, line in enumerate(lines[:-1]):
        m = _TERM.match(line)
        if not (m and lines[i + 1].startswith(": ")):
            continue
        body = [lines[i + 1][2:]]
        for more in lines[i + 2:]:
            if not more.startswith("  ") or not more.strip():
                break
            body.append(more)
        out[m.group(1)] = plain(" ".join(body))
    return out


def generated() -> str:
    schema = config_schema({"github": settings.KNOWN_KEYS, "www": www_security.KNOWN_KEYS},
                           descriptions(PAGE.read_text(encoding="utf-8")))
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    if "--write" in argv:
        OUT.write_text(generated(), encoding="utf-8")
    else:
        sys.stdout.write(generated())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
