"""bsdkm.yml → BuildmasterConfig: workers, one builder per (target, variant), schedulers, UI, db;
and ``master.cfg`` itself, checked by Buildbot's own ``buildbot checkconfig``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from buildbot.process.properties import Secret
from conftest import ROOT

from buildbot_bsdkm.buildbot import steps
from buildbot_bsdkm.buildbot.control import Layout, create
from buildbot_bsdkm.buildbot.master_config import (
    MasterSettings,
    MasterSettingsError,
    buildmaster_config,
    load_master_settings,
)
from buildbot_bsdkm.buildbot.retrying_build import BoundedRetryBuild
from buildbot_bsdkm.buildbot.worker_config import work_steps
from buildbot_bsdkm.buildbot.worker_passwords import WorkerConfigError, parse_workers
from buildbot_bsdkm.config.bsdkm_yml import load_config, parse_config

LOCAL = MasterSettings(www_port=8010, pb_port=9989, local_workers={"local": "pw"}, config_path="/x/bsdkm.yml")


def repo_config():
    return load_config(ROOT / "bsdkm.yml")


def with_workers(block: str):
    text = (ROOT / "bsdkm.yml").read_text().replace("workers: {}", block)
    return parse_config(text, "bsdkm.yml", ROOT)


def test_one_builder_per_target_and_variant_of_the_repository_config():
    cfg = repo_config()
    c = buildmaster_config(cfg, LOCAL)
    # release and bisect builders: tests of their own
    stage_builders = [b for b in c["builders"] if not b.name.startswith("release/") and b.name != "bisect"]
    names = sorted(b.name for b in stage_builders)
    # The local worker runs userspace and the Linux module in QEMU; nothing here runs freebsd-kmod.
    expected = sorted(f"{t}/{v}" for t, v in cfg.pairs(variants=list(cfg.variants)) if t != "freebsd-kmod")
    assert names == expected
    assert "userspace/intelasm" in names and "linux-kmod-qemu/noasm" in names
    for b in stage_builders:
        assert b.workernames == ["local"]
        assert b.factory.buildClass is BoundedRetryBuild
        assert [s.step_class for s in work_steps(b.factory)] == list(steps.STAGE_STEPS)
        assert b.factory.retry_settings.max_infra_retries == cfg.retry.max_infra_retries


def test_schedulers_web_ui_and_database():
    c = buildmaster_config(repo_config(), LOCAL)
    by_name = {s.name: s for s in c["schedulers"]}
    assert set(by_name) == {"changes", "force", "nightly-rc", "release-tags", "release-force", "bisect"}
    # Changes build the enabled variants only; the nightly release-candidate run is the full matrix.
    assert "userspace/aesni-avx" not in by_name["changes"].builderNames
    assert "userspace/aesni-avx" in by_name["nightly-rc"].builderNames
    assert set(c["www"]["plugins"]) == {"waterfall_view", "console_view", "grid_view", "wsgi_dashboards"}
    assert c["www"]["port"] == "tcp:8010:interface=127.0.0.1"
    assert c["db"] == {"db_url": "sqlite:///state.sqlite"}
    local = c["workers"][0]
    assert local.properties.getProperty("bsdkm_config") == "/x/bsdkm.yml"


def test_remote_workers_with_secret_and_env_passwords_and_tags(monkeypatch, tmp_path: Path):
    monkeypatch.setenv("QEMU1_PW", "from-env")
    cfg = with_workers(
        "workers:\n"
        "  fbsd143: {password: {secret: fbsd143-pw}, tags: [freebsd-14.3-amd64]}\n"
        "  qemu1: {password: {env: QEMU1_PW}, tags: [linux-qemu], max_builds: 2}\n")
    (tmp_path / "fbsd143-pw").write_text("s3cret\n")
    (tmp_path / "fbsd143-pw").chmod(0o600)  # Buildbot's SecretInAFile refuses one others can read
    c = buildmaster_config(cfg, MasterSettings(www_port=1, pb_port=2, pb_interface="",
                                                secrets_dir=str(tmp_path)))
    workers = {w.workername: w for w in c["workers"]}
    assert isinstance(workers["fbsd143"].password, Secret)
    assert workers["qemu1"].password == "from-env"
    builders = {b.name: b.workernames for b in c["builders"]}
    assert builders["freebsd-kmod/crypto-register"] == ["fbsd143"]
    assert builders["linux-kmod-qemu/intelasm"] == ["qemu1"]
    assert sorted(builders["userspace/noasm"]) == ["fbsd143", "qemu1"]
    assert c["protocols"]["pb"]["port"] == "tcp:2"
    assert len(c["secretsProviders"]) == 1


@pytest.mark.parametrize(("block", "message"), [
    ("workers: {w1: {tags: [x]}}", "workers.w1: missing key 'password'"),
    ("workers: {w1: {password: hunter2}}", "workers.w1.password: expected {secret: NAME} or {env: VARIABLE}"),
    ("workers: {w1: {password: {env: X}, colour: red}}", "workers.w1: unknown key(s) colour"),
    ("workers: {w1: {password: {env: X}, max_builds: 0}}", "workers.w1.max_builds: expected a positive"),
    ("workers: {'bad name': {password: {env: X}}}", "workers.bad name: worker names are"),
])
def test_malformed_workers_block_names_the_key(block, message):
    cfg = with_workers(block)
    with pytest.raises(WorkerConfigError) as e:
        parse_workers(cfg.workers)
    assert message in str(e.value)


def test_workers_block_that_is_not_a_mapping_is_named():
    with pytest.raises(WorkerConfigError, match="workers: expected a mapping"):
        parse_workers(["a", "b"])


def test_env_password_missing_is_named_without_a_value(monkeypatch):
    monkeypatch.delenv("NOPE_PW", raising=False)
    cfg = with_workers("workers: {w1: {password: {env: NOPE_PW}}}")
    with pytest.raises(WorkerConfigError, match="environment variable NOPE_PW is not set"):
        buildmaster_config(cfg, MasterSettings(www_port=1, pb_port=2))


def test_no_worker_at_all_is_an_error():
    with pytest.raises(WorkerConfigError, match="nothing could run a build"):
        buildmaster_config(repo_config(), MasterSettings(www_port=1, pb_port=2))


def test_master_settings_errors_name_the_file_and_key(tmp_path: Path):
    # no file: a master made by `bsdkm-ci init master`: its ports are bsdkm.yml's (master:)
    s = load_master_settings(tmp_path, environ={})
    assert (s.www_port, s.pb_port, dict(s.local_workers), s.db_url) == (None, None, {}, "sqlite:///state.sqlite")
    (tmp_path / "bsdkm-master.json").write_text("{not json")
    with pytest.raises(MasterSettingsError, match="unreadable"):
        load_master_settings(tmp_path)
    (tmp_path / "bsdkm-master.json").write_text(json.dumps({"www_port": "80", "pb_port": 1}))
    with pytest.raises(MasterSettingsError, match="www_port: expected int"):
        load_master_settings(tmp_path)
    (tmp_path / "bsdkm-master.json").write_text(json.dumps({"www_port": 80, "pb_port": 1,
                                                            "local_workers": {"local": "secrets/none"}}))
    with pytest.raises(MasterSettingsError, match="local_workers.local: cannot read password file"):
        load_master_settings(tmp_path)


def test_db_url_from_environment_overrides(tmp_path: Path):
    (tmp_path / "bsdkm-master.json").write_text(json.dumps({"www_port": 80, "pb_port": 1}))
    s = load_master_settings(tmp_path, environ={"BSDKM_DB_URL": "postgresql://u@127.0.0.1:5/db"})
    assert s.db_url == "postgresql://u@127.0.0.1:5/db"


def test_master_cfg_passes_buildbot_checkconfig(tmp_path: Path):
    layout = Layout(tmp_path)
    settings = create(layout, config_path=ROOT / "bsdkm.yml")
    assert (layout.master / "master.cfg").resolve() == ROOT / "master.cfg"
    assert (layout.worker("local") / "password").stat().st_mode & 0o077 == 0  # the secret is private
    assert settings["www_port"] != settings["pb_port"]
    bindir = Path(sys.executable).parent
    done = subprocess.run([str(bindir / "buildbot"), "checkconfig", str(layout.master)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Config file is good" in done.stdout


def test_master_cfg_with_broken_bsdkm_yml_names_the_problem(tmp_path: Path):
    bad = tmp_path / "bsdkm.yml"
    bad.write_text("targets: {userspace: {}}\nvariants: {noasm: {flags: --disable-asm}}\n")
    layout = Layout(tmp_path / "m")
    create(layout, config_path=bad)
    bindir = Path(sys.executable).parent
    done = subprocess.run([str(bindir / "buildbot"), "checkconfig", str(layout.master)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "variants.noasm: missing key 'targets'" in done.stdout + done.stderr


def _github_services(c: dict) -> list:
    """The master's services but the bisect trigger (tests/unit/buildbot/test_bisect_buildbot.py) and
    the frozen startup heap."""
    from buildbot_bsdkm.buildbot.bisect_builder import BisectOnNewSignatures
    from buildbot_bsdkm.buildbot.heap import FrozenStartupHeap

    return [s for s in c["services"] if not isinstance(s, BisectOnNewSignatures | FrozenStartupHeap)]


def test_github_block_plugs_in_the_github_services(tmp_path: Path, monkeypatch):
    """With a ``github:`` block, master.cfg gets GitHub's change hook and reporters through the hook."""
    monkeypatch.setenv("GITHUB_TOKEN", "t0ken")
    monkeypatch.setenv("BSDKM_WEBHOOK_SECRET", "s3cret")
    plain = buildmaster_config(repo_config(), LOCAL)
    assert "change_hook_dialects" not in plain["www"] and _github_services(plain) == []
    text = (ROOT / "bsdkm.yml").read_text().replace("github: {}", "github: {repo: wolfSSL/wolfssl}")
    cfg = parse_config(text, "bsdkm.yml", ROOT)
    settings = MasterSettings(www_port=1, pb_port=2, local_workers={"local": "pw"}, basedir=str(tmp_path))
    c = buildmaster_config(cfg, settings)
    assert "github" in c["www"]["change_hook_dialects"]
    assert len(_github_services(c)) == 2


def test_ports_and_interfaces_come_from_the_master_section(tmp_path: Path):
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "w1-pw").write_text("pw\n")
    (tmp_path / "secrets" / "w1-pw").chmod(0o600)
    s = load_master_settings(tmp_path, environ={})
    cfg = with_workers("workers: {w1: {password: {secret: w1-pw}}}")
    c = buildmaster_config(cfg, s)  # the documented defaults
    assert c["www"]["port"] == "tcp:8010:interface=127.0.0.1"
    assert c["protocols"]["pb"]["port"] == "tcp:9989:interface=127.0.0.1"  # loopback until opened
    cfg = with_workers("workers: {w1: {password: {secret: w1-pw}}}\n"
                       "master: {www_port: 8111, workers_port: 9111, listen: {www: '::', workers: 10.0.0.5}}")
    c = buildmaster_config(cfg, s)
    assert c["www"]["port"] == "tcp:8111:interface=\\:\\:"
    assert c["protocols"]["pb"]["port"] == "tcp:9111:interface=10.0.0.5"
    assert c["buildbotURL"] == "http://127.0.0.1:8111/"


@pytest.mark.parametrize(("block", "message"), [
    ("master: {www_port: 70000}", "master.www_port: must be a TCP port"),
    ("master: {www_port: 9000, workers_port: 9000}", "master.workers_port: the web UI and the workers"),
    ("master: {listen: {www: example.org}}", "master.listen.www: must be an IP address"),
    ("master: {listen: {web: 0.0.0.0}}", "master.listen.web: unknown key"),
    ("master: {port: 1}", "master.port: unknown key"),
])
def test_a_bad_master_section_names_the_key(block, message):
    with pytest.raises(ValueError) as e:
        with_workers(block)
    assert message in str(e.value)


def test_a_missing_worker_secret_is_named_before_the_master_starts(tmp_path: Path):
    # Buildbot itself only fails at `buildbot start`: KeyError 'secret key ... is not found'.
    cfg = with_workers("workers: {w1: {password: {secret: w1-pw}}}")
    with pytest.raises(WorkerConfigError, match="workers.w1.password: secret 'w1-pw' not found: there is no "
                       "secrets directory"):
        buildmaster_config(cfg, load_master_settings(tmp_path, environ={}))
    (tmp_path / "secrets").mkdir()
    with pytest.raises(WorkerConfigError, match="secret 'w1-pw' not found: cannot read .*secrets/w1-pw"):
        buildmaster_config(cfg, load_master_settings(tmp_path, environ={}))
    (tmp_path / "secrets" / "w1-pw").write_text("\n")
    with pytest.raises(WorkerConfigError, match="secret 'w1-pw' is empty"):
        buildmaster_config(cfg, load_master_settings(tmp_path, environ={}))


def test_a_pr_builds_and_reports_only_the_builders_the_master_has(monkeypatch, tmp_path: Path):
    # linux-kmod-qemu has no worker here, so no builder: a PR request for it would stay pending
    # forever, and the PR comment with it.
    from buildbot_bsdkm.github.controller import PullRequestBuilds

    monkeypatch.setenv("GH_T", "ghp_x")
    monkeypatch.setenv("GH_H", "hook")
    text = (ROOT / "bsdkm.yml").read_text().replace("workers: {}", "workers: {w1: {password: {env: GH_T}}}")
    text = text.replace("github: {}", "github: {repo: o/r, token_env: GH_T, webhook_secret_env: GH_H}")
    cfg = parse_config(text, "bsdkm.yml", ROOT)
    assert {t for t, _ in cfg.pairs()} >= {"userspace", "linux-kmod-qemu"}
    c = buildmaster_config(cfg, MasterSettings(basedir=str(tmp_path)))
    (controller,) = [s for s in c["services"] if isinstance(s, PullRequestBuilds)]
    names = {b.name for b in c["builders"]}
    assert {b.name for b in controller.builders} == {f"userspace/{v}" for _, v in cfg.pairs()} & names
    assert all(b.target == "userspace" for b in controller.builders)
