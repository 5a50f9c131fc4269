"""`bsdkm-ci init master` / `init worker`: a master that starts as written, and a worker of each kind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ROOT

from buildbot_bsdkm.cli import main
from buildbot_bsdkm.config.bsdkm_yml import load_config
from buildbot_bsdkm.config.workers import parse_workers

BIN = Path(sys.executable).parent


def _checkconfig(master: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(master.parent)}
    return subprocess.run([str(BIN / "buildbot"), "checkconfig", str(master)], capture_output=True, text=True,
                          timeout=120, check=False, env=env, cwd=master.parent)


def test_init_master_writes_a_master_that_passes_checkconfig(tmp_path: Path, capsys) -> None:
    master = tmp_path / "M"
    assert main(["init", "master", str(master), "--worker", "lx:userspace", "--worker", "fbsd:freebsd",
                 "--worker", "q1:linux-qemu"]) == 0
    out = capsys.readouterr().out
    written = {p.name for p in master.iterdir()}
    assert {"master.cfg", "bsdkm.yml", "buildbot.tac", "secrets", "policies"} <= written
    assert not (master / "master.cfg.sample").exists()
    assert (master / "secrets").stat().st_mode & 0o777 == 0o700
    passwords = {}
    for name in ("lx", "fbsd", "q1"):
        secret = master / "secrets" / name
        assert secret.stat().st_mode & 0o777 == 0o600
        passwords[name] = secret.read_text().strip()
        assert len(passwords[name]) >= 24
        assert passwords[name] not in out  # never printed
        assert f"--name {name} --password-file {secret}" in out
    assert len(set(passwords.values())) == 3
    config = load_config(master / "bsdkm.yml")
    m = config.master
    assert (m.www_port, m.workers_port) == (8010, 9989)
    assert (m.www_listen, m.workers_listen) == ("127.0.0.1", "127.0.0.1")
    specs = {s.name: s for s in parse_workers(config.workers)}
    assert specs["lx"].can_run("userspace") and not specs["lx"].can_run("linux-kmod-qemu")
    assert specs["fbsd"].can_run("freebsd-kmod") and not specs["fbsd"].can_run("userspace")
    assert specs["q1"].can_run("linux-kmod-qemu") and specs["q1"].can_run("userspace")
    assert all(s.password.kind == "secret" and s.password.name == s.name for s in specs.values())
    # the packaged configuration otherwise, comments included
    packaged = yaml.safe_load((ROOT / "bsdkm.yml").read_text())
    assert yaml.safe_load((master / "bsdkm.yml").read_text())["variants"] == packaged["variants"]
    assert "# github:" in (master / "bsdkm.yml").read_text()
    assert config.policy == master / "policies" / "default.yml" and config.policy.is_file()
    checked = _checkconfig(master)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "Config file is good!" in checked.stdout


def test_checkconfig_names_a_missing_worker_secret(tmp_path: Path) -> None:
    master = tmp_path / "M"
    assert main(["init", "master", str(master)]) == 0
    (master / "secrets" / "linux").unlink()
    checked = _checkconfig(master)
    assert checked.returncode != 0
    text = checked.stdout + checked.stderr
    assert "workers.linux.password: secret 'linux' not found" in text
    assert "Traceback" not in text


W = ["init", "worker"]


@pytest.mark.parametrize(("argv", "message"), [
    (["init", "master", "{d}", "--worker", "x:vax"], "KIND must be one of userspace, linux-qemu, freebsd"),
    (["init", "master", "{d}", "--worker", "bad name:userspace"], "a worker name is letters"),
    (["init", "master", "{d}", "--worker", "a:userspace", "--worker", "a:freebsd"], "given twice"),
    (["init", "master", "{full}"], "not empty"),
    ([*W, "{d}", "--master", "nohost", "--name", "w", "--password-file", "{pw}"], "HOST:PORT"),
    ([*W, "{d}", "--master", "h:99999", "--name", "w", "--password-file", "{pw}"], "HOST:PORT"),
    ([*W, "{d}", "--master", "h:1", "--name", "w", "--password-file", "{d}/none"], "cannot read"),
    ([*W, "{full}", "--master", "h:1", "--name", "w", "--password-file", "{pw}"], "not empty"),
])
def test_init_refuses_bad_input_and_writes_nothing(
    tmp_path: Path, capsys, argv: list[str], message: str
) -> None:
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep").write_text("x")
    pw = tmp_path / "pw"
    pw.write_text("secret-pw\n")
    d = tmp_path / "new"
    args = [a.format(d=d, full=full, pw=pw) for a in argv]
    assert main(args) == 2
    assert message in capsys.readouterr().err
    assert not d.exists() or not any(d.iterdir())
    assert [p.name for p in full.iterdir()] == ["keep"]


def test_init_worker_of_each_kind(tmp_path: Path, capsys) -> None:
    pw = tmp_path / "pw"
    pw.write_text("s3cret-worker-pw\n")
    for kind in ("userspace", "linux-qemu"):
        w = tmp_path / kind
        assert main(["init", "worker", str(w), "--kind", kind, "--master", "ci.example.org:9989",
                     "--name", f"w-{kind}", "--password-file", str(pw)]) == 0
        doc = json.loads((w / "worker.json").read_text())
        assert doc == {"name": f"w-{kind}", "master_host": "ci.example.org", "master_port": 9989,
                       "kind": kind}
        assert (w / "password").read_text().strip() == "s3cret-worker-pw"
        assert (w / "password").stat().st_mode & 0o777 == 0o600
        assert "s3cret" not in (w / "buildbot.tac").read_text() + (w / "worker.json").read_text()
    out = capsys.readouterr().out
    assert "linux-qemu/setup.sh" in out and "s3cret" not in out
    # the Linux QEMU setup script is in the package and finds its kmod sources there
    setup = next(line for line in out.splitlines() if "setup.sh" in line).split("sh ", 1)[1].split()[0]
    assert Path(setup).is_file() and (Path(setup).parents[2] / "kmod" / "linux" / "loader.c").is_file()

    fb = tmp_path / "fbsd"
    assert main(["init", "worker", str(fb), "--kind", "freebsd", "--master", "ci.example.org:9989",
                 "--name", "fbsd-14", "--password-file", str(pw)]) == 0
    out = capsys.readouterr().out
    assert (fb / "setup.sh").read_text() == (ROOT / "workers" / "freebsd" / "setup.sh").read_text()
    assert (fb / "password").stat().st_mode & 0o777 == 0o600
    command = next(line for line in out.splitlines() if "sh setup.sh" in line).strip()
    # the third argument is the password FILE's path, and the output says so
    assert command == "cd fbsd && sh setup.sh ci.example.org:9989 fbsd-14 ./password"
    assert "./password is the file in this directory holding the worker's password" in out
    # the printed command, dry-run on a stand-in FreeBSD: the worker and its bsdkm-ci, password unseen
    tools = tmp_path / "fbsd-tools"
    tools.mkdir()
    (tools / "uname").write_text('#!/bin/sh\ncase "$1" in -m) echo amd64 ;; *) echo FreeBSD ;; esac\n')
    (tools / "freebsd-version").write_text("#!/bin/sh\necho 14.3-RELEASE\n")
    for tool in tools.iterdir():
        tool.chmod(0o755)
    env = dict(os.environ, PATH=f"{tools}:{os.environ['PATH']}", DRY_RUN="1")
    run = subprocess.run(["sh", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=60, check=False)
    assert run.returncode == 0, run.stderr
    plan = run.stderr
    assert "create-worker /home/buildbot/worker ci.example.org:9989 fbsd-14 <password from ./password>" \
        in plan
    assert "buildbot-bsdkm @ git+https://github.com/wolfSSL/bsdkm-ci" in run.stderr
    assert "PATH=/home/buildbot/venv/bin:" in run.stderr  # the builds find bsdkm-ci
    assert "s3cret" not in run.stderr + run.stdout
