"""The architecture page's folder map is drawn from the code: every package folder under
``buildbot_bsdkm/`` has its row, the map names no folder that is not there, and no path the page
names in backticks is gone (a module moved without its page following)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "buildbot_bsdkm"
PAGE = ROOT / "docs" / "architecture.md"
MAP_HEADING = "## Folder map"


def _folders() -> set[str]:
    """Every package folder (one with an ``__init__.py``) and every folder at the package's top (``_data/``),
    as ``a/`` or ``a/b/``, relative to the package."""
    packages = {f"{p.parent.relative_to(PACKAGE).as_posix()}/" for p in PACKAGE.rglob("__init__.py")
                if p.parent != PACKAGE and "__pycache__" not in p.parts}
    top = {f"{p.name}/" for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"}
    return packages | top


def _map_section() -> str:
    text = PAGE.read_text(encoding="utf-8")
    assert MAP_HEADING in text, f"{PAGE.name} has no '{MAP_HEADING}' section"
    section = text.split(MAP_HEADING, 1)[1]
    return re.split(r"\n## ", section, maxsplit=1)[0]


def _map_rows() -> set[str]:
    """The folders the map's table names in its first column (`` `a/` `` or `` `a/b/` ``)."""
    return set(re.findall(r"^\|\s*`([\w/]+/)`", _map_section(), flags=re.M))


def test_every_package_folder_is_in_the_folder_map() -> None:
    assert sorted(_folders() - _map_rows()) == []


def test_the_folder_map_names_no_folder_that_is_not_there() -> None:
    assert sorted(_map_rows() - _folders()) == []


def test_the_loose_modules_row_names_exactly_the_loose_modules() -> None:
    row = next((ln for ln in _map_section().splitlines() if ln.startswith("| (top)")), "")
    named = set(re.findall(r"`(\w+\.py)`", row))
    assert named == {p.name for p in PACKAGE.glob("*.py")}


def test_every_path_the_page_names_exists() -> None:
    """A backticked ``x/y.py`` or ``x/`` is a path in the package or in the repository."""
    text = PAGE.read_text(encoding="utf-8")
    gone = []
    for token in sorted(set(re.findall(r"`([\w./-]+(?:/|\.py))`", text))):
        if token.startswith(("/", ".")) or "/" not in token and not token.endswith(".py"):
            continue
        path = token.removeprefix("buildbot_bsdkm/")
        if not path.endswith(".py") and f"{path.split('/')[0]}/" not in _folders():
            continue  # an output or repository folder (``vm/``, ``docs/``), not the package's
        if "/" not in path and path.endswith(".py"):
            # a bare module name: somewhere in the package
            if not any(PACKAGE.rglob(path)):
                gone.append(token)
            continue
        if not ((PACKAGE / path).exists() or (ROOT / path).exists()):
            gone.append(token)
    assert gone == []


def test_the_folder_map_is_the_generated_one() -> None:
    """The map between its markers is what ``scripts/architecture_map.py`` prints (``--write`` writes it)."""
    script = ROOT / "scripts" / "architecture_map.py"
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True)
    assert result.stdout.strip() in PAGE.read_text(encoding="utf-8")


def test_the_page_restates_no_api() -> None:
    """The page is the map and the reasoning: no per-module API sections to drift from the code."""
    text = PAGE.read_text(encoding="utf-8")
    assert "Public API" not in text and "## Modules and who calls what" not in text
