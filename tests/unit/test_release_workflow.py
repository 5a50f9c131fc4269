"""How a release is cut: the tag check (scripts/release_check.py) and the release workflow's shape.

The workflow itself is linted with actionlint and action-validator (commands/action/test_action_lint.py);
the wheel test it runs, scripts/wheel_smoke.sh, runs in tests/integration/test_wheel.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from script_module import load_script

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"


release_check = load_script(ROOT / "scripts" / "release_check.py")

CHANGELOG = """# Changelog

## [Unreleased]

## [1.3.0] - 2027-02-01

### Added

- a thing

## [1.2.0] - 2027-01-01

### Fixed

- another
"""


def _tree(tmp_path: Path, version: str, changelog: str = CHANGELOG) -> Path:
    (tmp_path / "pyproject.toml").write_text(f'[project]\nname = "buildbot-bsdkm"\nversion = "{version}"\n')
    (tmp_path / "CHANGELOG.md").write_text(changelog)
    return tmp_path


def test_a_tag_of_the_version_with_a_dated_entry_is_releasable(tmp_path: Path) -> None:
    notes = release_check.check("v1.3.0", _tree(tmp_path, "1.3.0"))
    assert notes == "### Added\n\n- a thing"


@pytest.mark.parametrize(("tag", "version", "changelog", "says"), [
    ("v1.3", "1.3.0", CHANGELOG, "not vMAJOR.MINOR.PATCH"),
    ("v1.3.1", "1.3.0", CHANGELOG, "pyproject.toml's version is 1.3.0"),
    ("v1.4.0", "1.4.0", CHANGELOG, "no '## [1.4.0] - YYYY-MM-DD' entry"),
    ("v1.4.0", "1.4.0", CHANGELOG.replace("[Unreleased]", "[1.4.0] - unreleased"), "is not dated"),
])
def test_what_cannot_be_released_is_named(tmp_path: Path, tag: str, version: str, changelog: str,
                                          says: str) -> None:
    with pytest.raises(release_check.NotReleasable, match=re.escape(says)):
        release_check.check(tag, _tree(tmp_path, version, changelog))


def test_the_repository_is_not_released_while_its_entry_is_undated() -> None:
    import tomllib

    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    text = (ROOT / "CHANGELOG.md").read_text()
    dated = re.search(rf"^## \[{re.escape(version)}\] - \d{{4}}-\d{{2}}-\d{{2}}$", text, re.M)
    if dated:
        assert release_check.check(f"v{version}")
    else:
        with pytest.raises(release_check.NotReleasable, match="not dated"):
            release_check.check(f"v{version}")


def _workflow() -> dict:
    doc = yaml.safe_load(WORKFLOW.read_text())
    doc["on"] = doc.pop(True)  # YAML 1.1 reads the key `on` as a boolean
    return doc


def test_release_runs_on_version_tags_only_and_tests_before_it_publishes() -> None:
    wf = _workflow()
    assert wf["on"]["push"] == {"tags": ["v[0-9]+.[0-9]+.[0-9]+"]}  # never on the moving v1 itself
    assert wf["permissions"] == {}
    jobs = wf["jobs"]
    build = "\n".join(str(s.get("run", "")) for s in jobs["build"]["steps"])
    assert "scripts/release_check.py" in build and "python3 -m build" in build
    assert "scripts/wheel_smoke.sh dist/*.whl" in build
    assert jobs["build"]["permissions"] == {"contents": "read"}
    assert jobs["publish"]["needs"] == "build" and jobs["publish"]["if"] == "github.ref_type == 'tag'"
    assert jobs["move-major"]["needs"] == "publish"
    move = jobs["move-major"]["steps"][-1]["run"]
    assert 'major="${TAG%%.*}"' in move and "sort -V" in move and "git push --force" in move


def test_the_move_keeps_the_major_tag_on_the_newest_release(tmp_path: Path) -> None:
    """The step's own shell, against tag lists as `git ls-remote` prints them."""
    import subprocess

    step = _workflow()["jobs"]["move-major"]["steps"][-1]["run"]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "git").write_text('#!/bin/sh\n'
                                 'if [ "$1" = ls-remote ]; then cat "$TAGS"; else echo "$@" >> "$LOG"; fi\n')
    (bin_dir / "git").chmod(0o755)

    def moved(tag: str, tags: list[str]) -> str:
        (tmp_path / "tags").write_text("".join(f"{i:040x}\trefs/tags/{t}\n" for i, t in enumerate(tags)))
        log = tmp_path / "log"
        log.write_text("")
        env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "TAG": tag, "GITHUB_SHA": "c0ffee",
               "TAGS": str(tmp_path / "tags"), "LOG": str(log)}
        subprocess.run(["bash", "-eo", "pipefail", "-c", step], env=env, check=True, timeout=60)
        return log.read_text()

    assert "push --force origin refs/tags/v1" in moved("v1.3.0", ["v1.2.0", "v1.3.0"])
    assert moved("v1.2.4", ["v1.2.3", "v1.2.4", "v1.3.0"]) == ""  # a fix of an older minor
    assert "tag --force v1 c0ffee" in moved("v1.10.0", ["v1.9.0", "v1.10.0"])  # versions, not text order
