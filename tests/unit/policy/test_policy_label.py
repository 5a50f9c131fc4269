"""A report names its policy without a path of the machine that judged (a PR comment is public): the
packaged one by name, another relative to the config that names it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import ROOT

from buildbot_bsdkm.config.bsdkm_yml import load_config
from buildbot_bsdkm.model import RunResult
from buildbot_bsdkm.pipeline.gating import GateInputs
from buildbot_bsdkm.policy import DEFAULT_POLICY_PATH, evaluate, load_policy, policy_label
from buildbot_bsdkm.report.markdown import markdown_report


def test_the_packaged_policy_is_named_not_located() -> None:
    assert policy_label(DEFAULT_POLICY_PATH) == "policies/default.yml (packaged)"
    assert load_policy().label == "policies/default.yml (packaged)"
    run = RunResult("noasm", "userspace")
    text = markdown_report([run], evaluate([run], load_policy()))
    assert text.rstrip().endswith("Policy: `policies/default.yml` (packaged)")
    assert str(DEFAULT_POLICY_PATH.parent) not in text and "site-packages" not in text


def test_a_config_s_policy_is_named_relative_to_the_config(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copy(ROOT / "bsdkm.yml", tmp_path / "bsdkm.yml")
    shutil.copytree(ROOT / "policies", tmp_path / "policies")
    monkeypatch.chdir("/")
    gate = GateInputs.load(load_config(tmp_path / "bsdkm.yml"))
    assert gate.policy.label == "policies/default.yml"
    run = RunResult("noasm", "userspace")
    assert evaluate([run], gate.policy).policy_source == "policies/default.yml"


def test_elsewhere_by_its_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    policy = tmp_path / "strict.yml"
    policy.write_text("version: 1\n")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert load_policy(policy).label == "strict.yml"
    monkeypatch.chdir(tmp_path.parent)
    assert load_policy(policy).label == f"{tmp_path.name}/strict.yml"  # below the working directory


def test_a_verdict_judged_before_names_were_kept_shows_the_name_alone() -> None:
    run = RunResult("noasm", "userspace")
    verdict = evaluate([run], load_policy())
    verdict.policy_source = "/home/someone/ci/policies/strict.yml"
    assert "Policy: `strict.yml`" in markdown_report([run], verdict)
