"""Every action the Action, its examples and the repository's workflows use is pinned by commit, Dependabot
keeps the pins moving, and the cache keys are made of what the runner promises to a composite action.

- ``uses: owner/repo@<40 hex> # <release>`` for every third-party action; one commit per action across
  all files (an update cannot leave a file behind); this project's own action stays on ``@v1``.
- ``.github/dependabot.yml`` is valid for Dependabot (SchemaStore's schema, as check-jsonschema ships it)
  and looks at every folder that has a pinned ``uses:``.
- No ``github.action_ref`` (not promised inside a composite action): the pip and FreeBSD VM keys come
  from the action's own files through ``GITHUB_ACTION_PATH``; the key step is run here and its keys
  follow the files they stand for.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[4]
ACTION_YML = ROOT / "action" / "action.yml"
FILES = [ACTION_YML, *sorted((ROOT / "action" / "examples").glob("*.yml")),
         *sorted((ROOT / ".github" / "workflows").glob("*.yml"))]
OWN = "wolfSSL/bsdkm-ci/action@v1"
USES = re.compile(r"^[ -]*uses:\s*(?P<ref>\S+)(?P<rest>.*)$", re.M)
PINNED = re.compile(r"(?P<action>[\w.-]+/[\w.-]+(?:/[\w./-]+)?)@(?P<sha>[0-9a-f]{40})")
COMMENT = re.compile(r"\s+# (?P<tag>v\d+(?:\.\d+){0,2})(?:\s.*)?$")


def _uses() -> list[tuple[str, str, str]]:
    """(file, what is used, the rest of the line) of every ``uses:`` line."""
    return [(path.name, m["ref"], m["rest"]) for path in FILES for m in USES.finditer(path.read_text())]


def test_every_third_party_action_is_pinned_by_commit_with_its_release() -> None:
    unpinned, pins = [], {}
    for where, ref, rest in _uses():
        if ref.startswith("wolfSSL/bsdkm-ci/"):
            assert ref == OWN, (where, ref)  # the project's own action: its moving major tag
            continue
        m, tag = PINNED.fullmatch(ref), COMMENT.fullmatch(rest)
        if not (m and tag):
            unpinned.append((where, ref + rest))
            continue
        pins.setdefault(m["action"], set()).add((m["sha"], tag["tag"]))
    assert unpinned == []
    assert {a for a, p in pins.items() if len(p) > 1} == set(), pins  # one commit per action everywhere
    assert {"actions/checkout", "actions/setup-python", "actions/cache", "actions/upload-artifact",
            "actions/download-artifact"} <= set(pins)


def test_the_pin_check_refuses_a_tag_or_a_short_commit(tmp_path: Path) -> None:
    for line in ("uses: actions/checkout@v4", "uses: actions/checkout@11d5960 # v4.4.0",
                 "uses: actions/checkout@11d5960a326750d5838078e36cf38b85af677262"):
        m = USES.search(line)
        assert m and not (PINNED.fullmatch(m["ref"]) and COMMENT.fullmatch(m["rest"])), line


# ----------------------------------------------------------------------------- Dependabot

DEPENDABOT = ROOT / ".github" / "dependabot.yml"


def test_dependabot_config_is_valid() -> None:
    exe = Path(sys.executable).parent / "check-jsonschema"
    proc = subprocess.run([str(exe), "--builtin-schema", "vendor.dependabot", str(DEPENDABOT)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_dependabot_check_refuses_a_wrong_ecosystem(tmp_path: Path) -> None:
    bad = tmp_path / "dependabot.yml"
    bad.write_text(DEPENDABOT.read_text().replace("github-actions", "gh-actions"))
    exe = Path(sys.executable).parent / "check-jsonschema"
    proc = subprocess.run([str(exe), "--builtin-schema", "vendor.dependabot", str(bad)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 1 and "gh-actions" in proc.stdout


def test_dependabot_looks_wherever_an_action_is_pinned() -> None:
    config = yaml.safe_load(DEPENDABOT.read_text())
    (update,) = [u for u in config["updates"] if u["package-ecosystem"] == "github-actions"]
    watched = set(update["directories"])
    # Dependabot reads "/" as the root action.yml plus .github/workflows/, any other folder as its *.yml.
    workflows = ROOT / ".github" / "workflows"
    folders = {"/" if p.parent == workflows else "/" + p.parent.relative_to(ROOT).as_posix()
               for p in FILES if USES.search(p.read_text())}
    assert folders <= watched, folders - watched
    assert any(i["dependency-name"].startswith("wolfSSL/bsdkm-ci") for i in update.get("ignore", []))


# ----------------------------------------------------------------------------- cache keys


def _steps() -> list[dict]:
    return yaml.safe_load(ACTION_YML.read_text())["runs"]["steps"]


def test_no_cache_key_uses_what_a_composite_action_is_not_promised() -> None:
    assert not re.search(r"\$\{\{[^}]*\baction_ref\b", ACTION_YML.read_text())
    caches = [s for s in _steps() if str(s.get("uses", "")).startswith("actions/cache@")]
    assert len(caches) == 3
    for step in caches:
        for field in ("key", "restore-keys"):
            text = step["with"][field]
            contexts = set(re.findall(r"\b(github|runner|inputs|steps|env|hashFiles)\b[.(]", text))
            assert contexts <= {"runner", "inputs", "steps"}, (step["name"], field, contexts)


@pytest.fixture
def action_copy(tmp_path: Path) -> Path:
    """The action as a runner has it: its folder inside the checkout, beside pyproject.toml."""
    shutil.copytree(ROOT / "action", tmp_path / "repo" / "action")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "repo" / "pyproject.toml")
    return tmp_path / "repo" / "action"


def _keys(action_dir: Path, tmp_path: Path) -> dict[str, str]:
    (step,) = [s for s in _steps() if s.get("id") == "action-keys"]
    output = tmp_path / "github_output"
    output.write_text("")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")},
           "GITHUB_ACTION_PATH": str(action_dir), "GITHUB_OUTPUT": str(output)}
    subprocess.run(["bash", "-eo", "pipefail", "-c", step["run"]], env=env, cwd=tmp_path, check=True,
                   timeout=60)
    return dict(line.split("=", 1) for line in output.read_text().splitlines())


def test_the_keys_follow_the_files_they_stand_for(action_copy: Path, tmp_path: Path) -> None:
    first = _keys(action_copy, tmp_path)
    assert set(first) == {"pip", "vm"}
    assert re.fullmatch(r"py\d+\.\d+-[0-9a-f]{16}", first["pip"]), first
    assert re.fullmatch(r"[0-9a-f]{16}", first["vm"]), first
    assert _keys(action_copy, tmp_path) == first  # the same files, the same keys

    pyproject = action_copy.parent / "pyproject.toml"
    pyproject.write_text(pyproject.read_text() + "\n# another dependency\n")
    second = _keys(action_copy, tmp_path)
    assert second["pip"] != first["pip"] and second["vm"] == first["vm"]

    meta = action_copy / "action.yml"
    meta.write_text(meta.read_text().replace("pkg install -y", "pkg install -y -q"))
    third = _keys(action_copy, tmp_path)
    assert third["vm"] != second["vm"] and third["pip"] == second["pip"]
