"""What a release carries: the licence notice, one version and a changelog.

- ``LICENSE`` names the licence (SPDX id, copyright, where the full text is) without copying it, and the
  wheel ships it (``license-files``; the wheel itself is checked in tests/integration/test_wheel.py).
- The version is written once, in ``pyproject.toml``; the code reads it with importlib.metadata.
- ``CHANGELOG.md`` keeps the Keep a Changelog layout, and its newest release is the version.
"""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

from buildbot_bsdkm import cli

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "buildbot_bsdkm"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
PROJECT = PYPROJECT["project"]


def _name(requirement: str) -> str:
    """The normalised distribution name of a requirement string (PEP 503)."""
    name = re.match(r"[A-Za-z0-9._-]+", requirement.strip())
    assert name, requirement
    return re.sub(r"[-_.]+", "-", name.group(0)).lower()


def _lists() -> dict[str, list[str]]:
    found = {"base": [_name(r) for r in PROJECT["dependencies"]]}
    for extra, reqs in PROJECT.get("optional-dependencies", {}).items():
        found[f"[{extra}]"] = [_name(r) for r in reqs if _name(r) != _name(PROJECT["name"])]
    return found


# ----------------------------------------------------------------------------- licence


def test_the_licence_file_names_the_licence_without_copying_it() -> None:
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "SPDX-License-Identifier: GPL-3.0-or-later" in text
    assert re.search(r"^Copyright \(C\) \d{4} wolfSSL Inc\.$", text, re.M)
    assert "https://www.gnu.org/licenses/gpl-3.0" in text
    assert "/usr/share/common-licenses/GPL-3" in text
    # A pointer, not the licence: short, and none of the licence's own headings.
    assert len(text.splitlines()) <= 25
    for heading in ("Preamble", "TERMS AND CONDITIONS", "END OF TERMS"):
        assert heading not in text


def test_pyproject_declares_the_licence_and_ships_the_file() -> None:
    assert PROJECT["license"] == "GPL-3.0-or-later"
    assert PROJECT["license-files"] == ["LICENSE"]


# ----------------------------------------------------------------------------- version


def test_the_version_is_written_once() -> None:
    version = PROJECT["version"]
    assert metadata.version("buildbot-bsdkm") == version  # the installed (editable) metadata is pyproject's
    written = [f"{f.relative_to(ROOT)}:{n}" for f in sorted(PACKAGE.rglob("*.py"))
               for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), start=1)
               if "__version__" in line or f'"{version}"' in line or f"'{version}'" in line]
    assert written == []


def test_version_flag_prints_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        cli.main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"bsdkm-ci {metadata.version('buildbot-bsdkm')}"


# ----------------------------------------------------------------------------- changelog

_RELEASE = re.compile(r"^## \[(?P<version>[^\]]+)\](?: - (?P<date>\d{4}-\d{2}-\d{2}|unreleased))?$")


def test_the_changelog_keeps_a_changelog_form() -> None:
    lines = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8").splitlines()
    assert lines[0] == "# Changelog"
    assert "keepachangelog.com" in "\n".join(lines[:10])
    releases = [line for line in lines if line.startswith("## ")]
    assert releases[0] == "## [Unreleased]"
    parsed = [_RELEASE.match(line) for line in releases[1:]]
    assert all(parsed), [line for line, m in zip(releases[1:], parsed, strict=True) if not m]
    # the newest release is the version pyproject.toml gives
    assert parsed and parsed[0]["version"] == PROJECT["version"]
    groups = {line for line in lines if line.startswith("### ")}
    assert groups <= {f"### {g}" for g in ("Added", "Changed", "Deprecated", "Removed", "Fixed", "Security")}
    assert "### Added" in groups
