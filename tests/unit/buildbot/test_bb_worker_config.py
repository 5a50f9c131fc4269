"""A worker on another machine builds with the master's bsdkm.yml, not the copy packaged on it."""

from __future__ import annotations

from pathlib import Path

import pytest
from buildbot.steps.transfer import StringDownload
from conftest import ROOT

from buildbot_bsdkm.buildbot import steps
from buildbot_bsdkm.buildbot.master_config import MasterSettings, buildmaster_config
from buildbot_bsdkm.buildbot.worker_config import CONFIG_DIR, work_steps, worker_copy
from buildbot_bsdkm.config.bsdkm_yml import ConfigError, load_config, parse_config

REMOTE = "workers:\n  far: {password: {env: FAR_PW}, tags: [linux-qemu]}\n"


@pytest.fixture(autouse=True)
def _password(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAR_PW", "not-a-real-one")


def _master_dir(tmp_path: Path, extra: str = "") -> Path:
    """A master's folder: its own bsdkm.yml (one edited variant), a policy and a known-issues file."""
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "strict.yml").write_text((ROOT / "policies" / "default.yml").read_text())
    (tmp_path / "known.yml").write_text(
        "- id: aes-gcm\n  signatures: ['selftest:AES-GCM']\n  url: https://github.com/wolfSSL/wolfssl/issues/1\n"
        "  reason: upstream\n  until: 5.9.3\n")
    text = (ROOT / "bsdkm.yml").read_text().replace("workers: {}", REMOTE)
    text = text.replace("policy: policies/default.yml", "policy: policies/strict.yml")
    cfg = tmp_path / "bsdkm.yml"
    cfg.write_text(text.split("known_issues:")[0] + "known_issues: known.yml\ncache_dir: here-only\n" + extra)
    return cfg


def test_the_copy_carries_the_files_it_names_and_drops_the_masters_own_folders(tmp_path: Path) -> None:
    copy = worker_copy(_master_dir(tmp_path))
    assert sorted(copy.files) == ["bsdkm.yml", "known-issues.yml", "policy.yml"]
    sent = tmp_path / "sent"
    sent.mkdir()
    for name, text in copy.files.items():
        (sent / name).write_text(text)
    got = load_config(sent / "bsdkm.yml")
    master = load_config(tmp_path / "bsdkm.yml")
    assert got.policy == sent / "policy.yml" and got.policy.read_text() == master.policy.read_text()
    assert [(k.id, k.signatures) for k in got.known_issues.entries] == [("aes-gcm", ("selftest:AES-GCM",))]
    assert got.variants == master.variants
    assert got.cache_dir is None and master.cache_dir == tmp_path / "here-only"
    assert not got.workers and master.workers  # nor who the workers are, nor GitHub's or the UI's settings
    assert "far:" not in copy.files["bsdkm.yml"] and "FAR_PW" not in copy.files["bsdkm.yml"]


def test_every_builder_first_writes_the_masters_config_and_its_stages_read_it(tmp_path: Path) -> None:
    cfg = load_config(_master_dir(tmp_path))
    c = buildmaster_config(cfg, MasterSettings(www_port=8010, pb_port=9989))
    assert c["builders"]
    for b in c["builders"]:
        first = b.factory.steps[:3]
        assert [s.step_class for s in first] == [StringDownload] * 3, b.name
        assert sorted(s.kwargs["workerdest"] for s in first) == [
            f"{CONFIG_DIR}/bsdkm.yml", f"{CONFIG_DIR}/known-issues.yml", f"{CONFIG_DIR}/policy.yml"]
    stage_builder = next(b for b in c["builders"] if b.name == "linux-kmod-qemu/noasm")
    for s in work_steps(stage_builder.factory):
        assert s.step_class in steps.STAGE_STEPS
        # was: no --config at all, so the worker ran bsdkm-ci's packaged bsdkm.yml
        assert s.kwargs["config_path"].default == f"{CONFIG_DIR}/bsdkm.yml"


def test_a_worker_property_naming_its_own_file_still_wins(tmp_path: Path) -> None:
    cfg = load_config(_master_dir(tmp_path))
    c = buildmaster_config(cfg, MasterSettings(www_port=8010, pb_port=9989))
    builder = next(b for b in c["builders"] if b.name == "userspace/noasm")
    (step,) = [s for s in work_steps(builder.factory) if s.step_class is steps.FetchSource]
    assert step.kwargs["config_path"].key == "bsdkm_config"  # the worker property, when set


def test_a_config_given_as_text_sends_nothing(tmp_path: Path) -> None:
    text = (ROOT / "bsdkm.yml").read_text().replace("workers: {}", REMOTE)
    c = buildmaster_config(parse_config(text, "<config>", ROOT), MasterSettings(www_port=8010, pb_port=9989))
    for b in c["builders"]:
        assert not any(s.step_class is StringDownload for s in b.factory.steps)


def test_a_copy_that_reads_differently_is_refused_naming_the_file(tmp_path: Path) -> None:
    cfg = _master_dir(tmp_path, extra="")
    cfg.write_text(cfg.read_text().replace("known_issues: known.yml", "known_issues: [1, 2]"))
    with pytest.raises(ConfigError, match=r"bsdkm\.yml \(as sent to the workers\)"):
        worker_copy(cfg)
