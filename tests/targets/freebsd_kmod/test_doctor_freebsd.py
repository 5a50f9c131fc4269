"""``bsdkm-ci doctor`` and freebsd-kmod's prerequisites on this (Debian) machine, and setup.sh's plan.

The doctor's run on a FreeBSD layout, through sudo, is in test_faithful_double.py; here: what it says
where FreeBSD is not, its exit statuses, the master it finds in a worker directory, the check of
the kernel sources against the running kernel, and setup.sh on a -STABLE kernel (dry run).
"""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest

from buildbot_bsdkm.cli import main
from buildbot_bsdkm.config.bsdkm_yml import load_config
from buildbot_bsdkm.pipeline.runtime.stage_error import StageError
from buildbot_bsdkm.pipeline.targets import all_targets
from buildbot_bsdkm.pipeline.targets.freebsd_kmod import worker
from buildbot_bsdkm.support.resources import default_config_path

ROOT = Path(__file__).resolve().parents[3]


def test_doctor_on_linux_prints_the_table_and_names_what_freebsd_kmod_misses(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--target", "freebsd-kmod"]) == 1
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert any(x.startswith("MISSING  freebsd-kmod") and "FreeBSD version: Linux" in x for x in lines)
    assert any("command kldload: not at /sbin/kldload" in x for x in lines)
    assert any("kernel sources /usr/src/sys: no /usr/src/sys/conf/kmod.mk -- fix: fetch src.txz" in x
               for x in lines)
    assert all(" -- fix: " in x for x in lines if x.startswith("MISSING"))
    assert "required prerequisite(s) missing: freebsd-kmod: FreeBSD version" in err
    assert lines[-1].startswith("-") and "master: not tried" in lines[-1]


def test_doctor_passes_for_userspace_here(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--target", "userspace"]) == 0, capsys.readouterr().out
    assert "every required prerequisite of userspace holds" in capsys.readouterr().err


@pytest.mark.parametrize(("args", "message"), [
    (["--target", "freebsd"], "unknown target freebsd (known: userspace"),
    (["--master", "ci.example.org"], "--master must be HOST:PORT, got 'ci.example.org'"),
    (["--worker-dir", "/nonexistent/worker"], "/nonexistent/worker/buildbot.tac: cannot read"),
])
def test_doctor_refuses_bad_input_with_exit_2(args: list[str], message: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--target", "userspace", *args]) == 2
    assert message in capsys.readouterr().err


def test_doctor_tries_the_master_a_worker_directory_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    with socket.socket() as master:
        master.bind(("127.0.0.1", 0))
        master.listen(1)
        port = master.getsockname()[1]
        # what `buildbot-worker create-worker` writes
        (tmp_path / "buildbot.tac").write_text(
            f"import os\nbasedir = '{tmp_path}'\nbuildmaster_host = '127.0.0.1'\nport = {port}\n"
            "workername = 'fbsd14'\npasswd = 'x'\n")
        assert main(["doctor", "--target", "userspace", "--worker-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"worker             master 127.0.0.1:{port}: its workers port accepts a connection" in out
    assert "python package buildbot-worker" in out


def test_kernel_sources_must_be_the_running_kernel_s(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    conf = tmp_path / "sys" / "conf"
    conf.mkdir(parents=True)
    (conf / "kmod.mk").write_text("")
    (conf / "newvers.sh").write_text('TYPE="FreeBSD"\nREVISION="14.2"\nBRANCH="RELEASE-p1"\n')
    monkeypatch.setattr(worker, "running_system", lambda: ("FreeBSD", "14.3-RELEASE-p2"))
    need = worker.kernel_sources(tmp_path / "sys")
    assert not need.ok and need.detail == "the tree is 14.2-RELEASE, the kernel 14.3-RELEASE"
    (conf / "newvers.sh").write_text('TYPE="FreeBSD"\nREVISION="14.3"\nBRANCH="RELEASE-p5"\n')
    assert worker.kernel_sources(tmp_path / "sys").ok  # patch levels: the same release's tree
    monkeypatch.setattr(worker, "running_system", lambda: ("FreeBSD", "15.0-CURRENT"))
    assert not worker.kernel_sources(tmp_path / "sys").ok


def test_crypto_register_makes_cryptodev_required() -> None:
    config = load_config(default_config_path())
    assert not worker.needs_crypto_register(config, "freebsd-kmod")  # crypto-register is disabled
    names = {n.name: n.required for n in all_targets()["freebsd-kmod"].prerequisites(config)}
    assert names["cryptodev (/dev/crypto)"] is False and names["kern.log_console_output"] is True


def test_elsewhere_than_freebsd_the_target_is_not_run_with_the_reason() -> None:
    config = load_config(default_config_path())
    with pytest.raises(StageError) as err:
        all_targets()["freebsd-kmod"].check_worker(config)
    assert err.value.failure.reason == "target-unavailable"
    assert "freebsd-kmod needs a FreeBSD worker (this is Linux)" in err.value.failure.message


def _dry_run(tmp_path: Path, release: str) -> subprocess.CompletedProcess[str]:
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "uname").write_text('#!/bin/sh\ncase "$1" in -m) echo amd64 ;; *) echo FreeBSD ;; esac\n')
    (tools / "freebsd-version").write_text(f"#!/bin/sh\necho {release}\n")
    for tool in tools.iterdir():
        tool.chmod(0o755)
    (tmp_path / "pw").write_text("x\n")
    env = dict(os.environ, PATH=f"{tools}:{os.environ['PATH']}", DRY_RUN="1")
    setup = ROOT / "workers" / "freebsd" / "setup.sh"
    return subprocess.run(["sh", str(setup), "ci.example.org:9989", "fbsd", str(tmp_path / "pw")], env=env,
                          capture_output=True, text=True, timeout=60, check=False)


def test_setup_fetches_no_releases_url_for_a_stable_kernel(tmp_path: Path) -> None:
    if Path("/usr/src/sys/conf/kmod.mk").exists():
        pytest.skip("this machine has /usr/src/sys: setup.sh would fetch nothing")
    run = _dry_run(tmp_path, "14.3-STABLE")
    assert run.returncode == 1
    assert "14.3-STABLE is not a release: check out its sources into /usr/src" in run.stderr
    assert "releases/" not in run.stderr


def test_setup_fetches_the_running_release_s_sources(tmp_path: Path) -> None:
    if Path("/usr/src/sys/conf/kmod.mk").exists():
        pytest.skip("this machine has /usr/src/sys: setup.sh would fetch nothing")
    run = _dry_run(tmp_path, "14.3-RELEASE-p2")
    assert run.returncode == 0, run.stderr
    url = "https://download.freebsd.org/releases/amd64/14.3-RELEASE/src.txz"
    assert f"fetch -o /tmp/src.txz {url}" in run.stderr
