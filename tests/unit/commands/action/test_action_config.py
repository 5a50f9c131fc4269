"""``bsdkm-ci action config`` (build the checked-out tree) and ``action vm-check`` (retry a lost VM)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from buildbot_bsdkm.commands.action.workflow import read_outputs
from buildbot_bsdkm.config.bsdkm_yml import LocalSource, load_config

ROOT = Path(__file__).resolve().parents[4]
BSDKM_CI = Path(sys.executable).parent / "bsdkm-ci"


def action(*args: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BSDKM_CI), "action", *map(str, args)], capture_output=True, text=True,
                          timeout=120, env=env)


def test_config_builds_the_workspace_and_keeps_everything_else(tmp_path: Path) -> None:
    conf_dir = tmp_path / "repo" / ".github"
    conf_dir.mkdir(parents=True)
    (conf_dir / "policy.yml").write_text("version: 1\n")
    doc = yaml.safe_load((ROOT / "bsdkm.yml").read_text())
    doc["policy"] = "policy.yml"  # relative to the config's directory
    (conf_dir / "bsdkm.yml").write_text(yaml.safe_dump(doc))
    proc = action("config", "--config", conf_dir / "bsdkm.yml", "--source", tmp_path / "repo",
                  "--write", tmp_path / "out" / "derived.yml")
    assert proc.returncode == 0, proc.stderr
    derived = load_config(tmp_path / "out" / "derived.yml")
    original = load_config(conf_dir / "bsdkm.yml")
    assert derived.source == LocalSource((tmp_path / "repo").resolve())
    assert derived.policy == (conf_dir / "policy.yml").resolve()  # still found from the copy's place
    assert (derived.variants, derived.targets, derived.benchmark) == (
        original.variants, original.targets, original.benchmark)


def test_config_errors_name_the_problem(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text("targets: {userspace: {flags: [--x]}}\nvariants: {v: {flags: [], targets: [nowhere]}}\n")
    proc = action("config", "--config", bad, "--source", tmp_path, "--write", tmp_path / "d.yml")
    assert proc.returncode == 2 and "nowhere" in proc.stderr and "Traceback" not in proc.stderr
    proc = action("config", "--source", tmp_path / "missing", "--write", tmp_path / "d.yml")
    assert proc.returncode == 2 and "is not a directory" in proc.stderr
    bad.write_text("- a list\n")
    proc = action("config", "--config", bad, "--source", tmp_path, "--write", tmp_path / "d.yml")
    assert proc.returncode == 2 and "is not a mapping of settings" in proc.stderr


def vm_check(out: Path, tmp: Path) -> tuple[subprocess.CompletedProcess[str], dict[str, str]]:
    gh_out = tmp / "gh_output"
    gh_out.write_text("")
    env = {**os.environ, "GITHUB_OUTPUT": str(gh_out)}
    proc = action("vm-check", "--out", out, env=env)
    return proc, read_outputs(gh_out.read_text())


def test_vm_lost_before_bsdkm_ci_ran_is_retried(tmp_path: Path) -> None:
    proc, out = vm_check(tmp_path / "never-copied-back", tmp_path)
    assert proc.returncode == 0
    assert out == {"retry": "true", "reason": "worker lost during vm-boot"}
    assert proc.stdout.startswith("::warning title=bsdkm-ci%3A FreeBSD VM step failed::")


def test_vm_that_ran_bsdkm_ci_is_not_retried(tmp_path: Path) -> None:
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    (out_dir / "run.exit-code").write_text("1\n")  # tests failed inside: the results decide
    proc, out = vm_check(out_dir, tmp_path)
    assert proc.returncode == 0
    assert out["retry"] == "false"
